"""The manifest file and the view of a table folder it gives (storage/manifest.py, layout.py):
pure functions, checked with tables of cases."""

from __future__ import annotations

import pytest

from storage.layout import StoredFile, is_pack_name, table_view
from storage.manifest import (
    FileRecord,
    Manifest,
    ManifestDamaged,
    Member,
    PackRecord,
    Retired,
    RowGroup,
    decode,
    encode,
)

PACK = "pack-20260101T000000Z-aaaaaaaaaaaa.parquet"
NEW = "pack-20260101T000001Z-bbbbbbbbbbbb.parquet"


def record(file: str, keys: tuple[str, ...], table: str = "scores") -> PackRecord:
    members = tuple(Member(k, i, 1) for i, k in enumerate(keys))
    groups = (RowGroup(len(keys), 4, 100, "0" * 64),)
    return PackRecord(table, file, 200, "1" * 64, "2" * 64, members, groups)


def listed(*names: str, size: int = 200, mtime: int = 7) -> list[StoredFile]:
    return [StoredFile("scores", n, f"/s/scores/{n}", size, mtime) for n in names]


def test_a_manifest_round_trips_and_its_checksum_catches_any_change():
    manifest = Manifest(
        packs=(record(PACK, ("a", "b")),),
        files={"generations": {"a.parquet": FileRecord(10, 5, 164)}},
        retired=(Retired("scores", "c.parquet", 30, 9, (PACK,)),),
    )
    payload = encode(manifest)
    assert decode(payload) == manifest
    assert decode(payload).packs[0].members[1] == Member("b", 1, 1)
    for at in (5, len(payload) // 2, len(payload) - 2):
        broken = bytearray(payload)
        broken[at] ^= 0x01
        with pytest.raises(ManifestDamaged):
            decode(bytes(broken))
    with pytest.raises(ManifestDamaged, match="header"):
        decode(b"not json\n{}")


def test_row_groups_locate_members():
    members = (Member("a", 0, 3), Member("b", 3, 0), Member("c", 3, 2), Member("d", 5, 4))
    groups = (RowGroup(2, 4, 10, "x"), RowGroup(2, 14, 10, "y"))
    pack = PackRecord("executions", PACK, 40, "s", "f", members, groups)
    assert pack.group_rows == ((0, 3), (3, 6))
    assert pack.groups_of(["a"]) == [0]
    assert pack.groups_of(["c", "d"]) == [1]
    assert pack.groups_of(["b"]) == []  # no rows: nothing to decode
    assert pack.rows == 9


def test_pack_names_are_never_shard_keys():
    assert is_pack_name(PACK) and not is_pack_name(f"sub/{PACK}")
    view = table_view("scores", listed(PACK), Manifest())
    assert not view.loose and [f.name for f in view.unknown] == [PACK]


# Each case: the folder's files, the manifest's packs and retired records, and what readers read
# (loose keys, live packs with their superseded members) and what is left over or missing.
CASES = [
    # a plain store: every shard is loose
    (["a.parquet", "b.parquet"], [], [], {"a", "b"}, {}, [], []),
    # compacted: the pack holds both
    ([PACK], [record(PACK, ("a", "b"))], [], set(), {PACK: set()}, [], []),
    # cut after the commit, before the pack is in place: the originals still count
    (
        ["a.parquet", "b.parquet"],
        [record(PACK, ("a", "b"))],
        [("a.parquet", (PACK,)), ("b.parquet", (PACK,))],
        {"a", "b"},
        {},
        [],
        [PACK],
    ),
    # cut after the pack is in place, before the originals are removed: they are skipped
    (
        [PACK, "a.parquet", "b.parquet"],
        [record(PACK, ("a", "b"))],
        [("a.parquet", (PACK,)), ("b.parquet", (PACK,))],
        set(),
        {PACK: set()},
        ["a.parquet", "b.parquet"],
        [],
    ),
    # a newer loose shard replaces a member (a dissolve cut short)
    ([PACK, "a.parquet"], [record(PACK, ("a", "b"))], [], {"a"}, {PACK: {"a"}}, [], []),
    # a pack rewritten into another, cut before the new one is in place: the old one counts
    (
        [PACK],
        [record(PACK, ("a", "b")), record(NEW, ("a", "b"))],
        [(PACK, (NEW,))],
        set(),
        {PACK: set()},
        [],
        [NEW],
    ),
    # ... and after: the new one counts, the old one is a leftover
    (
        [PACK, NEW],
        [record(PACK, ("a", "b")), record(NEW, ("a", "b"))],
        [(PACK, (NEW,))],
        set(),
        {NEW: set()},
        [PACK],
        [],
    ),
    # a dissolved pack not yet removed: its members are loose again, it is a leftover
    (
        [PACK, "a.parquet", "b.parquet"],
        [record(PACK, ("a", "b"))],
        [(PACK, ())],
        {"a", "b"},
        {},
        [PACK],
        [],
    ),
]


@pytest.mark.parametrize(("files", "packs", "retired", "loose", "live", "left", "missing"), CASES)
def test_the_view_of_every_step(files, packs, retired, loose, live, left, missing):
    manifest = Manifest(
        packs=tuple(packs),
        retired=tuple(Retired("scores", name, 200, 7, by) for name, by in retired),
    )
    view = table_view("scores", listed(*files), manifest)
    assert set(view.loose) == loose
    assert {p.file.name: set(p.superseded) for p in view.packs} == live
    assert sorted(f.name for f, _ in view.leftovers) == left
    assert [p.file for p in view.missing] == missing
    # every key is read exactly once
    keys = [k for k in view.loose] + [m.key for p in view.packs for m in p.members]
    assert len(keys) == len(set(keys)) and set(keys) == {"a", "b"}


def test_a_retired_file_that_changed_since_counts_again():
    """A shard rewritten after it was retired (another size or mtime) is a newer write."""
    manifest = Manifest(
        packs=(record(PACK, ("a", "b")),),
        retired=(Retired("scores", "a.parquet", 200, 7, (PACK,)),),
    )
    view = table_view("scores", [*listed(PACK), *listed("a.parquet", mtime=8)], manifest)
    assert set(view.loose) == {"a"} and view.packs[0].superseded == frozenset({"a"})
