"""What a command that answers from a store finds damaged among the files it reads, before it
answers (docs/store.md, "Damaged files and the commands that answer").

Reading treats a shard that fails its checks as missing (`Store.read_shard`, logged): the
writer redoes it, but an answer built on such a read would lose the setting without a word.
So `report`, `compare`, `view`, `show` and `export` first check the seal of every file they
will read (`storage.checks.scan_table` at `Depth.SEAL`, the check the writer makes at the start
of a run, limited to their tables and, for a command about a few settings, to those settings'
files), then either refuse (`StoreDamaged`) or, when told to skip, leave out every setting a
damaged file holds rows of and name it (`StoreDamage.left_out`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from storage.checks import Depth, FileCheck, scan_table
from storage.errors import StoreDamaged
from storage.integrity import ProblemKind
from storage.store import Store

# Problems of files no reader of the store reads (`storage.layout`): a temporary file of an
# interrupted write, a leftover whose rows a pack holds. They do not change an answer.
UNREAD = frozenset({ProblemKind.TEMPORARY_FILE, ProblemKind.COMPACTION_LEFTOVER})
REMEDY = (
    "`reprogrid verify --fix{store}` moves the damaged file(s) to the store's quarantine/ "
    "folder and the next `reprogrid run` redoes what they held"
)
SKIP = "; or pass --skip-damaged to answer without the settings they hold (each one named)"


@dataclass(frozen=True)
class DamagedFile:
    """A file a reader reads that fails its checks."""

    table: str
    file: str  # its name in the table's folder
    kind: ProblemKind
    detail: str
    settings: tuple[str, ...]  # the settings it holds rows of (none: a runs or repeat-check file)

    def describe(self) -> str:
        """`scores/<key>.parquet: checksum_mismatch (SHA-256 ..., recorded ...)`."""
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.table}/{self.file}: {self.kind.value}{detail}"

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "file": self.file,
            "kind": self.kind.value,
            "detail": self.detail,
            "setting_keys": list(self.settings),
        }


@dataclass(frozen=True)
class StoreDamage:
    """The damaged files among those a command reads (none: the store answers whole)."""

    store: str
    files: tuple[DamagedFile, ...] = ()

    @property
    def settings(self) -> frozenset[str]:
        """Every setting a damaged file holds rows of: what `--skip-damaged` leaves out."""
        return frozenset(s for f in self.files for s in f.settings)

    def of_setting(self, key: str) -> tuple[DamagedFile, ...]:
        return tuple(f for f in self.files if key in f.settings)

    def left_out(self) -> tuple[str, ...]:
        """One line per setting left out, with each of its damaged files and why; then one per
        damaged file of no setting (a run's record, a repeat-check's), whose rows are left out."""
        lines = [
            f"left out setting {key[:12]}: damaged "
            + "; ".join(f.describe() for f in self.of_setting(key))
            for key in sorted(self.settings)
        ]
        lines += [f"left out the rows of {f.describe()}" for f in self.files if not f.settings]
        return tuple(lines)

    def to_json(self) -> dict[str, Any]:
        """{"settings": {key: [file, ...]}, "files": [...]} (what an export writes)."""
        return {
            "settings": {
                key: [f"{f.table}/{f.file}" for f in self.of_setting(key)]
                for key in sorted(self.settings)
            },
            "files": [f.to_json() for f in self.files],
        }


def damaged_error(damage: StoreDamage, skippable: bool = True) -> StoreDamaged:
    """The refusal: every damaged file (and the settings it holds), then the way out (and
    --skip-damaged, when leaving their settings out still answers: `skippable`)."""
    lines = [f"  {f.describe()}{_whose(f)}" for f in damage.files]
    store = f" --store {damage.store}" if damage.store else ""
    return StoreDamaged(
        f"store {damage.store}: {len(damage.files)} file(s) this command reads fail their "
        "checks:\n"
        + "\n".join(lines)
        + "\n"
        + REMEDY.format(store=store)
        + (SKIP if skippable else "")
    )


def _whose(file: DamagedFile) -> str:
    if not file.settings:
        return ""
    shown = ", ".join(s[:12] for s in file.settings[:5])
    more = f" and {len(file.settings) - 5} more" if len(file.settings) > 5 else ""
    return f" [setting(s) {shown}{more}]"


def damaged_files(checks: Iterable[FileCheck]) -> tuple[DamagedFile, ...]:
    """The checks' failures in files readers read (a shard, a pack, a pack the manifest names
    that is gone); a damaged pack costs every member, since readers check it whole."""
    out = []
    for c in checks:
        if c.problem is None or c.problem in UNREAD:
            continue
        if c.shard_key is None and c.pack is None and c.problem is not ProblemKind.MISSING_FILE:
            continue  # a file not named like a shard: readers never read it
        settings = c.settings() | {s for _, s, _ in c.vouched if s}
        out.append(
            DamagedFile(c.file.table, c.file.name, c.problem, c.detail, tuple(sorted(settings)))
        )
    return tuple(out)


def find_damage(
    store: Store, tables: Sequence[str], keys: Collection[str] | None = None
) -> StoreDamage:
    """Check the seal of every file of `tables` readers read (only those of the settings `keys`,
    if given); the damaged ones. Reads each file's bytes once; moves nothing."""
    manifest = store.readable_manifest()
    found = [
        f
        for table in tables
        for f in damaged_files(scan_table(store, table, Depth.SEAL, manifest, keys))
    ]
    return StoreDamage(store.uri, tuple(found))


def check_damage(
    store: Store,
    tables: Sequence[str],
    skip: bool,
    keys: Collection[str] | None = None,
) -> StoreDamage:
    """`find_damage`, refused unless `skip`: raises StoreDamaged naming every damaged file and
    the way out; with `skip`, the damage (its settings are what the caller leaves out)."""
    damage = find_damage(store, tables, keys)
    if damage.files and not skip:
        raise damaged_error(damage)
    return damage
