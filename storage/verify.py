"""Checking a whole store, file by file, and quarantining what fails (docs/store.md).

`verify_store` checks every file of every table at `Depth.DECODE` (`storage.checks`): every
byte's seal, every row decoded, every row's key, every pack against its manifest record; and the
manifest itself, and every setting marked complete (a shard in each result table). With `fix`,
the writer finishes a compaction cut short, quarantines what is damaged (a damaged pack first
gives back its intact row groups) and removes temporary files.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from storage import packing
from storage.checks import (
    KEY_COLUMN,
    RESULT_TABLES,
    Depth,
    FileCheck,
    Quarantined,
    check_file,
    quarantine_damaged,
    scan_table,
    trusted_rows,
    trusted_settings,
)
from storage.errors import NotLockHolder
from storage.integrity import ProblemKind, Trust
from storage.manifest import MANIFEST_FILE, ManifestDamaged
from storage.schema import TABLES, SettingStatus
from storage.store import Store

__all__ = [
    "KEY_COLUMN",
    "RESULT_TABLES",
    "FileCheck",
    "Problem",
    "Quarantined",
    "TableSummary",
    "VerifyReport",
    "check_file",
    "quarantine_damaged",
    "scan_table",
    "trusted_rows",
    "trusted_settings",
    "verify_store",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    table: str | None  # None for the store's manifest
    file: str | None  # relative to the table's folder; None for a missing result
    setting_key: str | None  # None for runs shards and files not named like a shard
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "table": self.table,
            "file": self.file,
            "setting_key": self.setting_key,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class TableSummary:
    table: str
    files: int  # every file checked (hidden files aside)
    bytes: int
    trusted: Mapping[Trust, int] = field(default_factory=dict)  # shards that passed, by why

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "trusted": {t.value: self.trusted.get(t, 0) for t in Trust},
        }


@dataclass(frozen=True)
class VerifyReport:
    store: str
    tables: tuple[TableSummary, ...]
    problems: tuple[Problem, ...]
    settings_to_redo: tuple[str, ...]  # the next run redoes these (their results are not trusted)
    quarantined: tuple[Quarantined, ...] = ()  # with `fix`
    removed_temporary: int = 0  # with `fix`
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """No problem found (the CLI exits non-zero otherwise, `--fix` or not)."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "ok": self.ok,
            "tables": {s.table: s.to_json() for s in self.tables},
            "problems": [p.to_json() for p in self.problems],
            "settings_to_redo": list(self.settings_to_redo),
            "quarantined": [q.to_json() for q in self.quarantined],
            "removed_temporary": self.removed_temporary,
            "notes": list(self.notes),
        }


def verify_store(store: Store, fix: bool = False) -> VerifyReport:
    """Check every file of every table (checksums, schema, decodable rows, keys, packs against
    the manifest, foreign and temporary files, leftovers of a compaction cut short), the
    manifest, and every setting marked complete (a shard in each result table). With `fix` (the
    caller holds the writer lock), finish what a compaction left, quarantine the damaged and
    foreign files and remove temporaries; the report then lists what moved."""
    if fix and not store.holds_writer_lock:
        raise NotLockHolder(f"verify --fix on store {store.uri} needs its writer lock")
    problems = _manifest_problems(store)
    checks = {table: scan_table(store, table, Depth.DECODE) for table in TABLES}
    problems += [
        Problem(c.problem, t, c.file.name, c.setting_key, c.detail)
        for t, cs in checks.items()
        for c in cs
        if c.problem is not None
    ]
    problems += [
        Problem(
            ProblemKind.COMPACTION_LEFTOVER,
            t,
            c.file.name,
            None,
            f"holds {len(c.pack.superseded)} shard(s) a newer loose file replaces: Parquet "
            "readers of the folder count them twice until the next writer dissolves it",
        )
        for t, cs in checks.items()
        for c in cs
        if c.pack is not None and c.pack.superseded
    ]
    missing, redo = _incomplete(store, checks)
    problems += missing
    quarantined: tuple[Quarantined, ...] = ()
    removed = 0
    if fix:
        packing.recover(store)  # a compaction cut short, a damaged manifest: first of all
        quarantined = quarantine_damaged(store, (c for cs in checks.values() for c in cs))
        removed = store.clean_temp()
    return VerifyReport(
        store=store.uri,
        tables=tuple(_summary(t, cs) for t, cs in checks.items()),
        problems=tuple(problems),
        settings_to_redo=tuple(sorted(redo)),
        quarantined=quarantined,
        removed_temporary=removed,
        notes=_notes(checks),
    )


def _manifest_problems(store: Store) -> list[Problem]:
    try:
        manifest = store.manifest()
    except ManifestDamaged as e:
        return [Problem(ProblemKind.MANIFEST, None, MANIFEST_FILE, None, str(e))]
    if manifest.empty and packing.has_packs(store):
        detail = "no manifest, but packs are there: the next writer derives one from them"
        return [Problem(ProblemKind.MANIFEST, None, MANIFEST_FILE, None, detail)]
    return []


def _incomplete(
    store: Store, checks: Mapping[str, Sequence[FileCheck]]
) -> tuple[list[Problem], set[str]]:
    """MISSING_RESULT problems (a complete setting without any shard in a result table) and
    the settings the next run redoes: complete ones lacking a trusted result, and those whose
    settings shard is damaged."""
    complete = {
        row["setting_key"]
        for row in store.read_table("settings", columns=("setting_key", "status")).to_pylist()
        if row.get("status") == SettingStatus.COMPLETE.value and row.get("setting_key")
    }
    problems, redo = [], set()
    for table in RESULT_TABLES:
        named = {s for c in checks[table] if not c.gone for s in c.settings()}
        named |= {s for c in checks[table] for _, s, _ in c.vouched if s}
        trusted = trusted_settings(checks[table])
        for key in sorted(complete - named):
            problems.append(
                Problem(
                    ProblemKind.MISSING_RESULT,
                    table,
                    None,
                    key,
                    "marked complete, but the table has no shard of it",
                )
            )
        redo |= complete - trusted
    redo |= {s for c in checks["settings"] if c.problem for s in c.settings()}
    return problems, redo


def _summary(table: str, checks: Sequence[FileCheck]) -> TableSummary:
    present = [c for c in checks if c.problem is not ProblemKind.MISSING_FILE]
    trusted = Counter(c.trust for c in present if c.trust is not None)
    return TableSummary(table, len(present), sum(c.file.size for c in present), dict(trusted))


def _notes(checks: Mapping[str, Sequence[FileCheck]]) -> tuple[str, ...]:
    notes = []
    for trust, how in (
        (Trust.PAGE_CRC, "trusted by their page checksums"),
        (
            Trust.FULL_READ,
            "trusted by reading them fully (a flipped bit in plain-encoded values cannot be seen)",
        ),
    ):
        tables = Counter(t for t, cs in checks.items() for c in cs if c.trust is trust)
        if tables:
            where = ", ".join(f"{n} in {t}" for t, n in sorted(tables.items()))
            notes.append(
                f"{sum(tables.values())} shard(s) without a recorded checksum "
                f"(written before checksums: {where}): {how}"
            )
    return tuple(notes)
