"""A pack's bytes (storage/packs.py): an ordinary sealed shard file for every reader, whose row
groups hold whole members; the manifest's record vouches for each row group, so that a flipped
bit anywhere is caught by the seal and costs at most the row group it hit."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.integrity import (
    CHECKSUM_KEY,
    SEAL_KEY,
    VERSION_KEY,
    ProblemKind,
    ShardDamaged,
    Trust,
    inspect,
)
from storage.packs import (
    decode_members,
    derive_record,
    encode_pack,
    footer_start,
    intact_groups,
    read_members,
    row_group_sizes,
)
from storage.schema import TABLES
from storage.store import Store
from tests.fixtures_store import write_synthetic_store

PACKED = ("settings", "executions", "scores")


@pytest.fixture(scope="module")
def members(tmp_path_factory) -> dict[str, list[tuple[str, pa.Table]]]:
    """Three members of each packed table, from the synthetic store."""
    root = str(tmp_path_factory.mktemp("synthetic"))
    specs = write_synthetic_store(root)
    store = Store(root)
    keys = sorted(k for k, s in specs.items() if s.status == "complete")[:3]
    return {t: [(k, store.read_shard(t, k)) for k in keys] for t in PACKED}


def pack(members, table: str, target_rows: int = 1) -> tuple[bytes, object]:
    return encode_pack(table, TABLES[table], members[table], "pack-x.parquet", target_rows)


@pytest.mark.parametrize(
    ("rows", "target", "expected"),
    [
        ([164, 164, 164], 64, [1, 1, 1]),
        ([1] * 10, 4, [4, 4, 2]),
        ([1, 0, 1], 2, [3]),
        ([], 64, []),
    ],
)
def test_row_groups_hold_whole_members(rows, target, expected):
    assert row_group_sizes(rows, target) == expected


@pytest.mark.parametrize("table", PACKED)
def test_a_pack_is_a_sealed_shard_file_with_its_members_in_row_groups(members, table):
    payload, record = pack(members, table)
    verdict, rows = inspect(payload, TABLES[table], decode=True)
    assert verdict.trust is Trust.SHA256 and verdict.sha256 == record.sha256
    assert rows.num_rows == sum(t.num_rows for _, t in members[table]) == record.rows
    plain = pq.read_table(pa.BufferReader(payload), page_checksum_verification=True)
    assert plain.num_rows == rows.num_rows  # any Parquet reader
    assert pq.read_metadata(pa.BufferReader(payload)).num_row_groups == len(members[table])
    assert derive_record(payload, table, record.file) == record  # it describes itself
    parquet = pq.ParquetFile(pa.BufferReader(payload), page_checksum_verification=True)
    got = read_members(parquet, record, None, TABLES[table])
    assert [k for k, _ in got] == [k for k, _ in members[table]]
    for (_, read), (_, written) in zip(got, members[table], strict=True):
        assert read.to_pylist() == written.to_pylist()
    data, where = decode_members(parquet, record, [members[table][1][0]], TABLES[table])
    assert data.num_rows == members[table][1][1].num_rows  # one row group decoded, no more
    assert intact_groups(payload, record) == [0, 1, 2]


def test_a_pack_needs_distinct_sorted_members(members):
    parts = members["scores"]
    with pytest.raises(ValueError, match="key order"):
        encode_pack("scores", TABLES["scores"], parts[::-1], "pack-x.parquet", 1)


def _vouched_wrongly(payload: bytes, record, at: int) -> bool:
    """Whether a pack damaged at byte `at` has a row group vouched for that holds `at`."""
    groups = intact_groups(payload, record)
    if groups is None:
        return False
    return any(g.offset <= at < g.offset + g.length for i in groups for g in [record.row_groups[i]])


@pytest.mark.parametrize("table", PACKED)
def test_bit_flips_across_a_pack_are_caught_and_cost_only_their_row_group(members, table):
    payload, record = pack(members, table)
    for at in range(0, len(payload), 31):
        damaged = bytearray(payload)
        damaged[at] ^= 1 << (at % 8)
        with pytest.raises(ShardDamaged):
            inspect(bytes(damaged), TABLES[table])
        assert not _vouched_wrongly(bytes(damaged), record, at)
    footer = bytearray(payload)
    footer[footer_start(payload) + 3] ^= 1
    assert intact_groups(bytes(footer), record) is None  # no footer: nothing vouched for


@pytest.mark.parametrize("table", PACKED)
def test_a_footer_list_that_lost_the_seal_is_caught(members, table):
    """The count of the footer's key-value list (one byte in Thrift's compact encoding) cut so
    that the list ends before the seal's entries: the footer still parses, the schema version
    is still there, and the pack would pass for an unsealed shard of an older writer, decoded
    and trusted by its page CRCs. A single flipped bit of that byte did it to a scores pack."""
    payload, _ = pack(members, table)
    # each entry starts with field 1 (binary), the key's length, the key; in the file's order
    at = {
        key: payload.find(b"\x18" + bytes([len(key)]) + key, footer_start(payload))
        for key in pq.ParquetFile(pa.BufferReader(payload)).metadata.metadata
    }
    keys = sorted(at, key=at.__getitem__)
    header = at[keys[0]] - 1  # the list's header byte: its count, then its type (a struct)
    assert payload[header] == (len(keys) << 4) | 0x0C, "not the list's header"
    kept = min(keys.index(SEAL_KEY), keys.index(CHECKSUM_KEY))
    assert kept > keys.index(VERSION_KEY), "the version comes after the seal: nothing to test"
    damaged = bytearray(payload)
    damaged[header] = (kept << 4) | 0x0C
    kv = pq.ParquetFile(pa.BufferReader(bytes(damaged))).metadata.metadata
    assert VERSION_KEY in kv and SEAL_KEY not in kv and CHECKSUM_KEY not in kv
    with pytest.raises(ShardDamaged) as caught:
        inspect(bytes(damaged), TABLES[table])
    assert caught.value.kind is ProblemKind.CHECKSUM_RECORD


@pytest.mark.heavy
@pytest.mark.parametrize("table", PACKED)
def test_every_single_bit_flip_of_a_pack_is_caught(members, table):
    payload, record = pack(members, table)
    for at in range(len(payload)):
        for bit in range(8):
            damaged = bytearray(payload)
            damaged[at] ^= 1 << bit
            with pytest.raises(ShardDamaged):
                inspect(bytes(damaged), TABLES[table])
            assert not _vouched_wrongly(bytes(damaged), record, at)
