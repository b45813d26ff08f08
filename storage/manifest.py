"""The store's manifest: which packs hold which shards, which loose shards the last compaction
checked, and which files a compaction cut short still has to remove (docs/store.md,
"Compaction").

One JSON file per store, `<root>/_manifest.json` (outside every table folder, and hidden from
Parquet readers by its leading "_"). Its first line is a header with the SHA-256 of the rest, so
a damaged manifest is noticed, never half-trusted. Only the holder of the writer lock writes it,
to a temporary name renamed into place (`Store.commit_manifest`): a reader sees the old manifest
or the new one. This module is pure: bytes in, records out.

A store that was never compacted has no manifest and reads exactly as before.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from storage.errors import StoreError

MANIFEST_FILE = "_manifest.json"
FORMAT = "reprogrid-manifest-v1"


class ManifestDamaged(StoreError):
    """The manifest does not parse or fails its checksum."""


@dataclass(frozen=True)
class Member:
    """One shard inside a pack: its key and its rows' place in the pack."""

    key: str
    first_row: int
    rows: int


@dataclass(frozen=True)
class RowGroup:
    """One row group of a pack: whole members only, and the SHA-256 of its bytes, so that a
    damaged pack gives back every row group that is intact (and a reader checks one alone)."""

    members: int  # how many consecutive members it holds
    offset: int  # its first byte in the file
    length: int  # bytes
    sha256: str


@dataclass(frozen=True)
class PackRecord:
    table: str
    file: str  # its name in the table's folder
    size: int  # bytes
    sha256: str  # of the whole file: the seal in its own footer
    footer_sha256: str  # of the Parquet footer (what decoding a row group alone relies on)
    members: tuple[Member, ...]  # in row order, keys sorted
    row_groups: tuple[RowGroup, ...]

    @property
    def rows(self) -> int:
        return sum(m.rows for m in self.members)

    @cached_property
    def by_key(self) -> dict[str, Member]:
        return {m.key: m for m in self.members}

    def members_of(self, group: int) -> tuple[Member, ...]:
        """The members row group `group` holds."""
        start = sum(g.members for g in self.row_groups[:group])
        return self.members[start : start + self.row_groups[group].members]

    @cached_property
    def group_rows(self) -> tuple[tuple[int, int], ...]:
        """(first row, rows) of each row group."""
        out, member, first = [], 0, 0
        for group in self.row_groups:
            rows = sum(m.rows for m in self.members[member : member + group.members])
            out.append((first, rows))
            first += rows
            member += group.members
        return tuple(out)

    def groups_of(self, keys: Iterable[str]) -> list[int]:
        """The row groups holding the members `keys` (sorted, each once)."""
        starts = [first for first, _ in self.group_rows]
        found = {
            bisect.bisect_right(starts, self.by_key[k].first_row) - 1
            for k in keys
            if k in self.by_key and self.by_key[k].rows
        }
        return sorted(found)


@dataclass(frozen=True)
class FileRecord:
    """A loose shard that passed its checks at the last compaction: while it keeps this size and
    mtime, `status` and `plan` trust it without reading it."""

    size: int
    mtime_ns: int
    rows: int


@dataclass(frozen=True)
class Retired:
    """A file whose rows are now elsewhere, to be removed: a loose shard absorbed by packs
    (`by`), or a pack dissolved or rewritten. While it is there with this size and mtime and
    everything in `by` is there too, readers of the store skip it."""

    table: str
    file: str
    size: int
    mtime_ns: int | None  # None where the filesystem reports none
    by: tuple[str, ...]  # the packs holding its rows; () for a dissolved pack (rows are loose)


@dataclass(frozen=True)
class Manifest:
    packs: tuple[PackRecord, ...] = ()
    files: Mapping[str, Mapping[str, FileRecord]] = field(default_factory=dict)
    retired: tuple[Retired, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.packs and not self.retired and not any(self.files.values())

    def packs_of(self, table: str) -> tuple[PackRecord, ...]:
        return tuple(p for p in self.packs if p.table == table)

    @cached_property
    def holders(self) -> dict[tuple[str, str], tuple[PackRecord, ...]]:
        """(table, shard key) -> the packs naming it as a member (more than one only while a
        pack is rewritten into others)."""
        out: dict[tuple[str, str], tuple[PackRecord, ...]] = {}
        for p in self.packs:
            for m in p.members:
                out[(p.table, m.key)] = (*out.get((p.table, m.key), ()), p)
        return out

    def touches(self, table: str, key: str) -> bool:
        """Whether writing shard `key` of `table` concerns a pack: it is a member of one, or a
        retired file's name."""
        name = f"{key}.parquet"
        return (table, key) in self.holders or any(
            r.table == table and r.file == name for r in self.retired
        )

    def retired_of(self, table: str) -> tuple[Retired, ...]:
        return tuple(r for r in self.retired if r.table == table)

    def with_packs(self, add: Iterable[PackRecord], drop: Iterable[str] = ()) -> Manifest:
        """This manifest with the packs `add`, without the pack files `drop` (table/file)."""
        gone = set(drop)
        kept = [p for p in self.packs if f"{p.table}/{p.file}" not in gone]
        return replace(self, packs=(*kept, *add))

    def with_retired(self, retired: Iterable[Retired]) -> Manifest:
        return replace(self, retired=tuple(retired))


def encode(manifest: Manifest) -> bytes:
    """The manifest file: a header line with the body's SHA-256, then the body (JSON)."""
    body = json.dumps(_body(manifest), sort_keys=True, separators=(",", ":")).encode()
    header = json.dumps({"format": FORMAT, "sha256": hashlib.sha256(body).hexdigest()})
    return header.encode() + b"\n" + body


def decode(payload: bytes) -> Manifest:
    """Parse and check a manifest file; raises ManifestDamaged."""
    head, newline, body = payload.partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError as e:
        raise ManifestDamaged(f"the manifest's header does not parse: {e}") from e
    if not newline or not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ManifestDamaged(f"not a {FORMAT} header: {head[:80]!r}")
    actual = hashlib.sha256(body).hexdigest()
    if actual != header.get("sha256"):
        raise ManifestDamaged(
            f"SHA-256 {actual[:16]}..., recorded {str(header.get('sha256'))[:16]}..."
        )
    try:
        return _parse(json.loads(body))
    except (ValueError, KeyError, TypeError) as e:
        raise ManifestDamaged(f"the manifest's body does not parse: {e}") from e


def _body(manifest: Manifest) -> dict[str, Any]:
    return {
        "packs": [
            {
                "table": p.table,
                "file": p.file,
                "size": p.size,
                "sha256": p.sha256,
                "footer_sha256": p.footer_sha256,
                "members": [[m.key, m.rows] for m in p.members],
                "row_groups": [[g.members, g.offset, g.length, g.sha256] for g in p.row_groups],
            }
            for p in manifest.packs
        ],
        "files": {
            table: {name: [r.size, r.mtime_ns, r.rows] for name, r in records.items()}
            for table, records in manifest.files.items()
            if records
        },
        "retired": [
            {
                "table": r.table,
                "file": r.file,
                "size": r.size,
                "mtime_ns": r.mtime_ns,
                "by": list(r.by),
            }
            for r in manifest.retired
        ],
    }


def _parse(body: Mapping[str, Any]) -> Manifest:
    packs = []
    for p in body["packs"]:
        members, first = [], 0
        for key, rows in p["members"]:
            members.append(Member(str(key), first, int(rows)))
            first += int(rows)
        groups = tuple(RowGroup(int(n), int(o), int(ln), str(d)) for n, o, ln, d in p["row_groups"])
        if sum(g.members for g in groups) != len(members):
            raise ValueError(f"pack {p['file']}: row groups of another number of members")
        packs.append(
            PackRecord(
                str(p["table"]),
                str(p["file"]),
                int(p["size"]),
                str(p["sha256"]),
                str(p["footer_sha256"]),
                tuple(members),
                groups,
            )
        )
    files = {
        str(table): {str(n): FileRecord(int(s), int(m), int(r)) for n, (s, m, r) in recs.items()}
        for table, recs in body["files"].items()
    }
    retired = tuple(
        Retired(
            str(r["table"]),
            str(r["file"]),
            int(r["size"]),
            None if r["mtime_ns"] is None else int(r["mtime_ns"]),
            tuple(str(b) for b in r["by"]),
        )
        for r in body["retired"]
    )
    return Manifest(tuple(packs), files, retired)
