"""Shard seals on bytes: what `seal` writes and what `inspect` catches (storage/integrity.py)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import integrity
from storage.integrity import (
    CHECKSUM_KEY,
    SEAL,
    SEAL_KEY,
    ProblemKind,
    ShardDamaged,
    Trust,
    inspect,
    is_shard_key,
    seal,
    setting_key_of,
)
from storage.schema import TABLES
from storage.store import Store
from tests.fixtures_store import write_synthetic_store
from tests.unit.storage.damage import flip_data_page_bit, footer_start, garbage_in_data, truncate

VERSION = {b"reprogrid.schema_version": b"1"}


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict[str, bytes]:
    """One sealed shard of each table, written by the store from synthetic rows."""
    root = str(tmp_path_factory.mktemp("synthetic"))
    write_synthetic_store(root)
    store = Store(root)
    return {
        t: store.read_bytes(min(store.shards(t).values(), key=lambda s: s.key).path) for t in TABLES
    }


def executions(n: int = 20) -> pa.Table:
    rows = [
        {
            "setting_key": "k",
            "task_id": f"Python/{i}",
            "sample_index": 0,
            "outcome": "passed" if i % 3 else "failed",
            "passed": bool(i % 3),
            "score": float(i % 3 > 0),
        }
        for i in range(n)
    ]
    return pa.Table.from_pylist(rows, schema=TABLES["executions"]).replace_schema_metadata(VERSION)


def unsealed(table: pa.Table, page_checksum: bool) -> bytes:
    """A shard as an older writer made it: no checksum record, page CRCs or not."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", write_page_checksum=page_checksum)
    return sink.getvalue().to_pybytes()


def kind_of(payload: bytes, table: str = "executions") -> ProblemKind:
    with pytest.raises(ShardDamaged) as caught:
        inspect(payload, TABLES[table], decode=True)
    return caught.value.kind


@pytest.mark.parametrize("table", list(TABLES))
def test_sealed_shards_read_anywhere_and_verify(shards, table):
    payload = shards[table]
    meta = pq.read_metadata(pa.BufferReader(payload))
    assert meta.metadata[SEAL_KEY] == SEAL and len(meta.metadata[CHECKSUM_KEY]) == 64
    verdict, rows = inspect(payload, TABLES[table], decode=True)
    assert verdict.trust is Trust.SHA256 and verdict.num_rows == rows.num_rows == meta.num_rows
    plain = pq.read_table(pa.BufferReader(payload), page_checksum_verification=True)
    assert plain.num_rows == rows.num_rows  # any Parquet reader, page CRCs verified
    assert inspect(payload, TABLES[table])[1] is None  # sealed: not decoded unless asked


@pytest.mark.parametrize("table", list(TABLES))
def test_bit_flips_across_the_whole_file_are_caught(shards, table):
    """Every 5th byte, a different bit each time: data pages, page headers, dictionaries, the
    footer, its length and magic (the heavy test below flips every bit)."""
    payload = shards[table]
    for at in range(0, len(payload), 5):
        damaged = bytearray(payload)
        damaged[at] ^= 1 << (at % 8)
        with pytest.raises(ShardDamaged):
            inspect(bytes(damaged), TABLES[table])


@pytest.mark.heavy
@pytest.mark.parametrize("table", list(TABLES))
def test_every_single_bit_flip_is_caught(shards, table):
    payload = shards[table]
    for at in range(len(payload)):
        for bit in range(8):
            damaged = bytearray(payload)
            damaged[at] ^= 1 << bit
            with pytest.raises(ShardDamaged):
                inspect(bytes(damaged), TABLES[table])


def test_damage_kinds(shards):
    payload = shards["generations"]
    assert kind_of(truncate(payload), "generations") is ProblemKind.TRUNCATED
    assert kind_of(garbage_in_data(payload), "generations") is ProblemKind.CHECKSUM_MISMATCH
    flipped = flip_data_page_bit(payload, "program")
    assert kind_of(flipped, "generations") is ProblemKind.CHECKSUM_MISMATCH
    assert kind_of(b"not a parquet file at all", "generations") is ProblemKind.TRUNCATED
    assert kind_of(b"garbage!" + payload[8:], "generations") is ProblemKind.UNREADABLE


def test_the_passed_column_bit_flip_is_caught_by_seal_and_by_page_crc():
    """The issue's case: one flipped bit in `passed` changed pass@1 without a warning."""
    sealed = seal(executions())
    assert kind_of(flip_data_page_bit(sealed, "passed")) is ProblemKind.CHECKSUM_MISMATCH
    legacy = unsealed(executions(), page_checksum=True)
    assert kind_of(flip_data_page_bit(legacy, "passed")) is ProblemKind.PAGE_CHECKSUM
    # a dictionary-encoded column: its dictionary page is covered too
    assert kind_of(flip_data_page_bit(legacy, "outcome")) is ProblemKind.PAGE_CHECKSUM


def test_shards_without_a_checksum_record_are_trusted_by_what_they_have():
    verdict, rows = inspect(unsealed(executions(), page_checksum=True), TABLES["executions"])
    assert verdict.trust is Trust.PAGE_CRC and rows.num_rows == 20  # always decoded
    verdict, rows = inspect(unsealed(executions(), page_checksum=False), TABLES["executions"])
    assert verdict.trust is Trust.FULL_READ and rows.num_rows == 20


def test_a_partial_or_unknown_checksum_record_is_a_problem():
    table = executions()
    for extra in (
        {SEAL_KEY: SEAL},
        {CHECKSUM_KEY: b"0" * 64},
        {SEAL_KEY: b"crc-v9", CHECKSUM_KEY: b"0" * 64},
    ):
        sink = pa.BufferOutputStream()
        with pq.ParquetWriter(sink, table.schema) as writer:
            writer.write_table(table)
            writer.add_key_value_metadata(extra)
        assert kind_of(sink.getvalue().to_pybytes()) is ProblemKind.CHECKSUM_RECORD, extra


def test_parquet_not_written_by_reprogrid_is_foreign():
    table = executions().replace_schema_metadata(None)
    assert kind_of(unsealed(table, page_checksum=True)) is ProblemKind.FOREIGN_FILE


def test_column_types_must_match_the_table_schema():
    """One type per column in every shard: an all-null column written as `null`, a column
    missing or extra, a changed type are all schema problems."""
    base = executions()
    nulls = base.set_column(
        base.schema.get_field_index("error_type"), "error_type", pa.nulls(base.num_rows, pa.null())
    )
    retyped = base.set_column(
        base.schema.get_field_index("score"), "score", pa.array([1] * base.num_rows, pa.int64())
    )
    for variant, words in (
        (nulls, "error_type: null"),
        (retyped, "score: int64"),
        (base.drop_columns(["details"]), "missing ['details']"),
        (base.append_column("extra", pa.array([1] * 20)), "extra ['extra']"),
    ):
        with pytest.raises(ShardDamaged, match=words.replace("[", r"\[").replace("]", r"\]")):
            inspect(seal(variant), TABLES["executions"])


def test_footer_start_is_where_the_data_ends():
    payload = seal(executions())
    assert payload[footer_start(payload) - 4 : footer_start(payload)] != b"PAR1"
    assert pq.read_metadata(pa.BufferReader(payload)).serialized_size == (
        len(payload) - 8 - footer_start(payload)
    )


@pytest.mark.parametrize(
    "shard_key, setting_key",
    [
        ("ab12", "ab12"),
        ("ab12~0001", "ab12"),
        ("ab12~c~3", "ab12"),
        ("20260101T000000-x", "20260101T000000-x"),
    ],
)
def test_shard_keys_map_to_their_setting(shard_key, setting_key):
    assert is_shard_key(shard_key)
    assert setting_key_of(shard_key) == setting_key


@pytest.mark.parametrize("bad", ["", "~0001", "ab12~", ".hidden", "_meta", "a/b"])
def test_invalid_shard_keys(bad):
    assert not is_shard_key(bad)
    if bad.startswith("~") or bad.endswith("~") or not bad:
        with pytest.raises(ValueError, match="neither <setting_key>"):
            setting_key_of(bad)


def test_rows_carrying_an_old_seal_in_their_metadata_seal_afresh(shards):
    footer = pq.read_metadata(pa.BufferReader(shards["executions"])).metadata
    stale = executions().replace_schema_metadata(
        {**VERSION, SEAL_KEY: SEAL, CHECKSUM_KEY: footer[CHECKSUM_KEY]}
    )
    assert inspect(seal(stale), TABLES["executions"])[0].trust is Trust.SHA256


def test_rows_are_decoded_from_an_arrow_owned_copy():
    # Over Python bytes, a reference Arrow's pool threads drop after read_table needs the GIL,
    # which at interpreter exit aborts the process: the decoder reads from its own copy.
    payload = b"PAR1" + bytes(range(256)) * 4 + b"PAR1"
    owned = integrity.arrow_owned(payload)
    assert owned.to_pybytes() == payload
    assert owned.address != pa.py_buffer(payload).address


@pytest.mark.parametrize("table", list(TABLES))
def test_a_sealed_shard_decodes_only_the_columns_asked_for(shards, table, monkeypatch):
    payload, schema = shards[table], TABLES[table]
    columns = list(reversed(schema.names[:3]))  # in the caller's order
    _, whole = inspect(payload, schema, decode=True)
    decoded = []
    read = pq.ParquetFile.read
    monkeypatch.setattr(
        pq.ParquetFile, "read", lambda self, *a, **k: decoded.append(a[0]) or read(self, *a, **k)
    )
    verdict, rows = inspect(payload, schema, decode=True, columns=columns)
    assert verdict.trust is Trust.SHA256 and rows.equals(whole.select(columns))
    assert decoded == [columns]  # nothing else decoded
    with pytest.raises(ShardDamaged):  # the checksum still covers every byte
        inspect(flip_data_page_bit(payload, schema.names[-1]), schema, True, columns)


def test_an_unsealed_shard_decodes_whole_whatever_columns_are_asked_for():
    """Without a seal, decoding is the check: a damaged page of a column not asked for fails."""
    legacy = unsealed(executions(), page_checksum=True)
    verdict, rows = inspect(legacy, TABLES["executions"], decode=True, columns=["passed"])
    assert verdict.trust is Trust.PAGE_CRC and rows.column_names == ["passed"]
    assert rows.equals(executions().select(["passed"]).replace_schema_metadata(None))
    with pytest.raises(ShardDamaged) as caught:
        inspect(flip_data_page_bit(legacy, "outcome"), TABLES["executions"], True, ["passed"])
    assert caught.value.kind is ProblemKind.PAGE_CHECKSUM


def test_a_column_an_older_sealed_shard_lacks_reads_as_nulls():
    older = executions().drop_columns(["isolation"])  # written before it was added
    schema = TABLES["executions"]
    rows = inspect(seal(older), schema, decode=True, columns=["isolation", "passed"])[1]
    assert rows.column_names == ["isolation", "passed"]
    assert rows["isolation"].null_count == older.num_rows and rows["passed"].equals(older["passed"])
