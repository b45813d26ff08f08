"""The completeness index: what is done is a pure function of the files in the store."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from storage.schema import SettingStatus
from storage.store import Store

logger = logging.getLogger(__name__)

RESULT_TABLES = ("generations", "executions", "scores")


@dataclass(frozen=True)
class SettingState:
    key: str
    status: SettingStatus  # PENDING when the store has no settings row
    has_generations: bool
    has_executions: bool
    has_scores: bool
    reason: str | None = None  # skip reason or last error
    attempts: int = 0
    error_type: str | None = None  # of the last failure

    @property
    def complete(self) -> bool:
        """Complete = marked complete AND every result shard is present and readable."""
        return (
            self.status is SettingStatus.COMPLETE
            and self.has_generations
            and self.has_executions
            and self.has_scores
        )


def build_index(store: Store, validate: bool = True) -> dict[str, SettingState]:
    """Read the settings table and the shard listings. With `validate`, a shard whose Parquet
    footer does not read (a crashed or truncated write, or one listed but gone: object-store
    listings may lag) counts as absent, so it is redone. A settings row without a key or with an
    unknown status is ignored (logged): its setting counts as pending."""
    present: dict[str, set[str]] = {}
    for table in RESULT_TABLES:
        present[table] = store.valid_shards(table) if validate else set(store.shards(table))
    settings = store.read_table("settings").to_pylist()
    states: dict[str, SettingState] = {}
    for row in settings:
        key = row.get("setting_key")
        try:
            status = SettingStatus(row.get("status"))
        except ValueError:
            logger.warning("settings row %s: unknown status %r, ignored", key, row.get("status"))
            continue
        if not key:
            continue
        states[key] = SettingState(
            key=key,
            status=status,
            has_generations=key in present["generations"],
            has_executions=key in present["executions"],
            has_scores=key in present["scores"],
            reason=row.get("status_reason"),
            attempts=row.get("attempts") or 0,
            error_type=row.get("error_type"),
        )
    return states
