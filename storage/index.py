"""The completeness index: what is done is a pure function of the files in the store."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from storage.checks import (
    RESULT_TABLES,
    Depth,
    FileCheck,
    quarantine_damaged,
    scan_table,
    trusted_rows,
    trusted_settings,
)
from storage.integrity import setting_key_of
from storage.manifest import Manifest
from storage.schema import RUN_TABLES, SettingStatus
from storage.store import Store

logger = logging.getLogger(__name__)

__all__ = ["RESULT_TABLES", "SettingState", "build_index"]

# What the index reads of each settings row (decoding the rest of a packed table is skipped)
INDEX_COLUMNS = (
    "setting_key",
    "status",
    "status_reason",
    "attempts",
    "error_type",
    "execution_key",
    "execution_json",
    "n_problems",
    "n_samples",
)


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
    execution_key: str | None = None  # identity of the stored executions (None: older store)
    execution_json: str | None = None  # its fields (canonical JSON)
    generated_samples: int = 0  # generations stored (in one shard or in chunks)
    total_samples: int | None = None  # problems x samples (None: not recorded, older store)
    # Files of the setting that fail their checks ("generations/<file>: truncated (...)"),
    # found by a validating index; the writer quarantines them and redoes what they held.
    damage: tuple[str, ...] = ()

    @property
    def partially_generated(self) -> bool:
        """Some generations are stored, not all (a run stopped between chunks)."""
        return self.total_samples is not None and 0 < self.generated_samples < self.total_samples

    @property
    def complete(self) -> bool:
        """Complete = marked complete AND every result shard is present and passes its checks."""
        return (
            self.status is SettingStatus.COMPLETE
            and self.has_generations
            and self.has_executions
            and self.has_scores
        )


def build_index(
    store: Store, validate: bool = True, quarantine: bool = False
) -> dict[str, SettingState]:
    """Read the settings table and the result tables' files.

    With `validate` (the default), a setting has a result table when it has a shard there whose
    content passes its checks and no shard there that fails them; a shard that is truncated,
    damaged, foreign to the schema, or listed but gone (object-store listings may lag) does not
    count, so its setting is redone. Readers (`status`, `plan`) check the seal (SHA-256 of every
    byte) of every pack and of every loose shard written since the last compaction, and trust a
    loose shard that compaction checked while it keeps its size and mtime (its record in the
    manifest): a store read by `status` costs its packs' bytes and its new files, not one read
    per shard. Without `validate`, only the listing counts. With `quarantine` (the writer,
    holding the lock: NotLockHolder otherwise; it implies `validate`), every file's seal is
    checked and damaged and foreign files of every table are moved to the quarantine first (a
    damaged pack gives back its intact row groups), so Parquet readers of each table folder
    read again.

    A settings row without a key or with an unknown status is ignored (logged): its setting
    counts as pending; so does a setting whose settings shard fails its checks. Every failing
    shard is named in its setting's `damage` (a setting whose settings shard is damaged gets a
    PENDING state with that damage, so readers can show it instead of losing it)."""
    present, generated, damage = _scan_results(store, validate, quarantine)
    states: dict[str, SettingState] = {}
    for row in store.read_table("settings", columns=INDEX_COLUMNS).to_pylist():
        state = _state_of(row, present, generated, damage, validate)
        if state is not None:
            states[state.key] = state
    for key, found in damage.items():
        if key not in states:  # its settings shard is the damaged file: no row to read
            states[key] = SettingState(
                key=key,
                status=SettingStatus.PENDING,
                has_generations=False,
                has_executions=key in present.get("executions", set()),
                has_scores=key in present.get("scores", set()),
                damage=tuple(found),
            )
    return states


def _scan_results(
    store: Store, validate: bool, quarantine: bool
) -> tuple[dict[str, set[str]], dict[str, int], dict[str, list[str]]]:
    """Which settings each result table holds, the generated rows per setting, and each
    setting's damaged files (`build_index`)."""
    present: dict[str, set[str]] = {}
    generated: dict[str, int] = {}
    damage: dict[str, list[str]] = {}
    depth = Depth.SEAL if quarantine else Depth.RECORDED
    # the writer's quarantine may change the manifest between tables: it reads it each time
    manifest = None if quarantine else store.readable_manifest()
    for table in RESULT_TABLES:
        if not validate and not quarantine:
            present[table] = {setting_key_of(k) for k in store.shards(table)}
            continue
        checks = _checked(store, table, depth, quarantine, manifest)
        _note_damage(damage, table, checks)
        present[table] = trusted_settings(checks)
        if table == "generations":
            generated = trusted_rows(checks)
    if validate or quarantine:
        for table in ("settings", *sorted(RUN_TABLES)):
            checks = _checked(store, table, depth, quarantine, manifest)
            if table != "repeat_checks":  # a damaged check record is not the setting's damage
                _note_damage(damage, table, checks)
    return present, generated, damage


def _state_of(
    row: Mapping[str, Any],
    present: dict[str, set[str]],
    generated: dict[str, int],
    damage: dict[str, list[str]],
    validate: bool,
) -> SettingState | None:
    """A settings row's state; None for a row without a key or with an unknown status (logged)."""
    key = row.get("setting_key")
    try:
        status = SettingStatus(str(row.get("status")))
    except ValueError:
        logger.warning("settings row %s: unknown status %r, ignored", key, row.get("status"))
        return None
    if not key:
        return None
    total = _total_samples(row)
    rows = generated.get(key, 0)
    # Generations committed in chunks are complete when every sample is there; a store
    # written before chunks recorded no total: its one shard is the whole setting.
    whole = key in present["generations"] and (total is None or rows >= total or not validate)
    return SettingState(
        key=key,
        status=status,
        has_generations=whole,
        has_executions=key in present["executions"],
        has_scores=key in present["scores"],
        reason=row.get("status_reason"),
        attempts=row.get("attempts") or 0,
        error_type=row.get("error_type"),
        execution_key=row.get("execution_key"),
        execution_json=row.get("execution_json"),
        generated_samples=rows,
        total_samples=total,
        damage=tuple(damage.get(key, ())),
    )


def _checked(
    store: Store, table: str, depth: Depth, quarantine: bool, manifest: Manifest | None
) -> tuple[FileCheck, ...]:
    """The table's checks; for the writer, after moving what fails to the quarantine (checked
    again when a damaged pack gave members back as loose shards)."""
    checks = scan_table(store, table, depth, manifest)
    if quarantine:
        moved = quarantine_damaged(store, checks)
        if any(m.restored for m in moved):
            checks = scan_table(store, table, depth)
    return checks


def _note_damage(damage: dict[str, list[str]], table: str, checks: Iterable[FileCheck]) -> None:
    """Record each failing file under the settings it holds (runs shards and foreign files have
    none)."""
    for c in checks:
        if c.problem is not None:
            detail = f" ({c.detail})" if c.detail else ""
            for setting in c.settings():
                damage.setdefault(setting, []).append(
                    f"{table}/{c.file.name}: {c.problem.value}{detail}"
                )


def _total_samples(row: Mapping[str, Any]) -> int | None:
    n_problems, n_samples = row.get("n_problems"), row.get("n_samples")
    if n_problems is None or n_samples is None:
        return None
    return int(n_problems) * int(n_samples)
