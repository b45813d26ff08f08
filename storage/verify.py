"""Checking a whole store, file by file, and quarantining what fails (docs/store.md).

`scan_table` classifies and checks every file of a table folder; `build_index` uses it (fast
mode: SHA-256 only for sealed shards) and `verify_store` (every shard decoded too). Integrity
and quarantine are per file, so a setting whose results span several chunk shards needs nothing
more here: each chunk is checked on its own and mapped to its setting by `setting_key_of`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow.compute as pc

from storage.errors import NotLockHolder
from storage.integrity import (
    QUARANTINED,
    ProblemKind,
    ShardDamaged,
    Trust,
    inspect,
    is_shard_key,
    setting_key_of,
)
from storage.schema import RUN_TABLES, TABLES, SettingStatus
from storage.store import TEMP_PREFIX, Store, StoredFile

logger = logging.getLogger(__name__)

RESULT_TABLES = ("generations", "executions", "scores")
# the column that names a shard's rows; else "setting_key"
KEY_COLUMN = dict.fromkeys(RUN_TABLES, "run_id")


@dataclass(frozen=True)
class FileCheck:
    """One file of a table folder and what its check found."""

    file: StoredFile
    shard_key: str | None  # None for a file that is not named like a shard
    setting_key: str | None  # the setting it belongs to; None for run-keyed and foreign files
    trust: Trust | None = None  # set when the shard passed
    problem: ProblemKind | None = None
    detail: str = ""
    gone: bool = False  # listed, but deleted before it was read (a lagging listing)
    num_rows: int = 0  # rows of a shard that passed (its footer's count)

    @property
    def ok(self) -> bool:
        return self.trust is not None


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    table: str
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
class Quarantined:
    table: str
    file: str  # its name in the table's folder
    setting_key: str | None
    kind: ProblemKind
    moved_to: str  # relative to the store's root

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "file": self.file,
            "setting_key": self.setting_key,
            "kind": self.kind.value,
            "moved_to": self.moved_to,
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


def _classify(file: StoredFile) -> FileCheck | None:
    """A FileCheck for a file not named like a shard, None for a hidden one (invisible to
    Parquet readers), or a FileCheck without a verdict yet for a shard."""
    parts = file.name.split("/")
    if any(p.startswith((".", "_")) for p in parts):
        if len(parts) == 1 and file.name.startswith(TEMP_PREFIX):
            return FileCheck(
                file,
                None,
                None,
                problem=ProblemKind.TEMPORARY_FILE,
                detail="left by an interrupted write",
            )
        return None
    key = file.name[: -len(".parquet")] if file.name.endswith(".parquet") else ""
    if len(parts) > 1 or not is_shard_key(key):
        return FileCheck(
            file,
            None,
            None,
            problem=ProblemKind.FOREIGN_FILE,
            detail="not named <key>.parquet in the table's folder; Parquet readers "
            "of the folder would read it",
        )
    setting = None if file.table in RUN_TABLES else setting_key_of(key)
    return FileCheck(file, key, setting)


def check_file(store: Store, file: StoredFile, decode: bool = False) -> FileCheck | None:
    """Classify and check one file (None for a hidden file). `decode` decodes sealed shards too
    (unsealed ones always are) and checks that their rows carry the shard's key."""
    check = _classify(file)
    if check is None or check.problem is not None:
        return check
    try:
        verdict, rows = inspect(store.read_bytes(file.path), TABLES[file.table], decode=decode)
    except FileNotFoundError:
        return replace(check, gone=True)
    except ShardDamaged as e:
        return replace(check, problem=e.kind, detail=e.detail)
    except OSError as e:
        return replace(check, problem=ProblemKind.READ_FAILED, detail=str(e))
    if rows is not None and rows.num_rows:
        expected = check.shard_key if file.table in RUN_TABLES else check.setting_key
        found = pc.unique(rows[KEY_COLUMN.get(file.table, "setting_key")]).to_pylist()
        if found != [expected]:
            detail = f"rows of {sorted(map(str, found))[:3]}"
            return replace(check, problem=ProblemKind.KEY_MISMATCH, detail=detail)
    return replace(check, trust=verdict.trust, num_rows=verdict.num_rows)


def scan_table(store: Store, table: str, decode: bool = False) -> tuple[FileCheck, ...]:
    """`check_file` over every file of a table folder (on threads for object stores)."""
    checks = store.map_items(lambda f: check_file(store, f, decode), store.files(table))
    return tuple(c for c in checks if c is not None)


def trusted_settings(checks: Iterable[FileCheck]) -> set[str]:
    """Settings with at least one shard that passed and none that failed."""
    checks = list(checks)
    good = {c.setting_key for c in checks if c.ok and c.setting_key}
    bad = {c.setting_key for c in checks if c.problem is not None and c.setting_key}
    return good - bad


def trusted_rows(checks: Iterable[FileCheck]) -> dict[str, int]:
    """Rows per setting over its shards that passed, for settings none of whose shards failed
    (a setting whose results are committed in chunks has several shards)."""
    checks = list(checks)
    trusted = trusted_settings(checks)
    rows: dict[str, int] = {}
    for c in checks:
        if c.ok and c.setting_key in trusted:
            rows[c.setting_key] = rows.get(c.setting_key, 0) + c.num_rows
    return rows


def quarantine_damaged(store: Store, checks: Iterable[FileCheck]) -> tuple[Quarantined, ...]:
    """Move every file whose problem is in QUARANTINED to the store's quarantine (the caller
    holds the writer lock: NotLockHolder otherwise). Never deletes."""
    if not store.holds_writer_lock:
        raise NotLockHolder(f"quarantining files of store {store.uri} needs its writer lock")
    moved = []
    for c in checks:
        if c.problem not in QUARANTINED:
            continue
        reason = {
            "kind": c.problem.value,
            "detail": c.detail,
            "shard_key": c.shard_key,
            "setting_key": c.setting_key,
        }
        try:
            to = store.quarantine(c.file, reason)
        except FileNotFoundError:
            continue  # gone since it was checked: nothing to keep
        moved.append(Quarantined(c.file.table, c.file.name, c.setting_key, c.problem, to))
    return tuple(moved)


def verify_store(store: Store, fix: bool = False) -> VerifyReport:
    """Check every file of every table (checksums, schema, decodable rows, keys, foreign and
    temporary files) and every setting marked complete (a shard in each result table). With
    `fix` (the caller holds the writer lock), quarantine the damaged and foreign files and
    remove temporaries; the report then lists what moved."""
    if fix and not store.holds_writer_lock:
        raise NotLockHolder(f"verify --fix on store {store.uri} needs its writer lock")
    checks = {table: scan_table(store, table, decode=True) for table in TABLES}
    problems = [
        Problem(c.problem, t, c.file.name, c.setting_key, c.detail)
        for t, cs in checks.items()
        for c in cs
        if c.problem is not None
    ]
    missing, redo = _incomplete(store, checks)
    problems += missing
    quarantined: tuple[Quarantined, ...] = ()
    removed = 0
    if fix:
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


def _incomplete(
    store: Store, checks: Mapping[str, Sequence[FileCheck]]
) -> tuple[list[Problem], set[str]]:
    """MISSING_RESULT problems (a complete setting without any shard in a result table) and
    the settings the next run redoes: complete ones lacking a trusted result, and those whose
    settings shard is damaged."""
    complete = {
        row["setting_key"]
        for row in store.read_table("settings").to_pylist()
        if row.get("status") == SettingStatus.COMPLETE.value and row.get("setting_key")
    }
    problems, redo = [], set()
    for table in RESULT_TABLES:
        named = {c.setting_key for c in checks[table] if c.setting_key and not c.gone}
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
    redo |= {c.setting_key for c in checks["settings"] if c.problem and c.setting_key}
    return problems, redo


def _summary(table: str, checks: Sequence[FileCheck]) -> TableSummary:
    trusted = Counter(c.trust for c in checks if c.trust is not None)
    return TableSummary(table, len(checks), sum(c.file.size for c in checks), dict(trusted))


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
