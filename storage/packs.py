"""A pack: many shards of one table in one sealed Parquet file (docs/store.md, "Compaction").

A pack is an ordinary shard file in every way a reader can see: the table's schema, zstd, page
CRCs, the SHA-256 of the whole file in its own footer (`storage.integrity.seal`). Its members
(the shards it holds) follow each other in key order, each whole inside one row group; the
footer also names them (`reprogrid.pack`: JSON `[[key, rows], ...]`), so a pack describes
itself wherever it goes. The manifest's record adds the SHA-256 of the footer and of each row
group's bytes: a damaged pack gives back every row group that is intact, and one member can be
read and checked without reading the rest. This module works on bytes and Arrow tables only.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import struct
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from storage.integrity import (
    CHECKSUM_KEY,
    VERSION_KEY,
    ProblemKind,
    ShardDamaged,
    conform,
    seal,
)
from storage.manifest import Member, PackRecord, RowGroup
from storage.schema import SCHEMA_VERSION

PACK_KEY = b"reprogrid.pack"  # footer key: the members, JSON [[key, rows], ...]


def footer_start(payload: bytes) -> int:
    """Where the Parquet footer (its Thrift metadata) begins."""
    return len(payload) - 8 - struct.unpack("<I", payload[-8:-4])[0]


def row_group_sizes(rows: Sequence[int], target_rows: int) -> list[int]:
    """How many consecutive members each row group holds: at least one, and members added
    until a group has `target_rows` rows (a member is never split)."""
    groups, count, total = [], 0, 0
    for n in rows:
        count += 1
        total += n
        if total >= target_rows:
            groups.append(count)
            count, total = 0, 0
    if count:
        groups.append(count)
    return groups


def encode_pack(
    table: str,
    schema: pa.Schema,
    parts: Sequence[tuple[str, pa.Table]],
    file: str,
    target_rows: int,
) -> tuple[bytes, PackRecord]:
    """The sealed pack of `parts` ((key, rows), keys sorted, each with `schema`'s columns) and
    its manifest record."""
    keys = [k for k, _ in parts]
    if keys != sorted(set(keys)):
        raise ValueError("a pack's members are distinct and in key order")
    rows = [t.num_rows for _, t in parts]
    data = pa.concat_tables([conform(t, schema) for _, t in parts]).combine_chunks()
    members_per_group = row_group_sizes(rows, target_rows)
    group_rows, start = [], 0
    for n in members_per_group:
        group_rows.append(sum(rows[start : start + n]))
        start += n
    footer = {
        VERSION_KEY: SCHEMA_VERSION.encode(),
        PACK_KEY: json.dumps([[k, n] for k, n in zip(keys, rows, strict=True)]).encode(),
    }
    payload = seal(data, row_groups=group_rows, footer=footer)
    members, first = [], 0
    for key, n in zip(keys, rows, strict=True):
        members.append(Member(key, first, n))
        first += n
    return payload, record_of(payload, table, file, tuple(members), members_per_group)


def record_of(
    payload: bytes,
    table: str,
    file: str,
    members: tuple[Member, ...],
    members_per_group: Sequence[int],
) -> PackRecord:
    """The manifest record of a pack's bytes: its seal, footer and row-group digests."""
    meta = pq.read_metadata(pa.BufferReader(payload))
    if meta.num_row_groups != len(members_per_group):
        raise ShardDamaged(
            ProblemKind.PACK_MISMATCH,
            f"{meta.num_row_groups} row groups, the members need {len(members_per_group)}",
        )
    ranges = _group_ranges(meta, footer_start(payload))
    groups = tuple(
        RowGroup(n, at, length, hashlib.sha256(payload[at : at + length]).hexdigest())
        for n, (at, length) in zip(members_per_group, ranges, strict=True)
    )
    digest = (meta.metadata or {}).get(CHECKSUM_KEY, b"").decode()
    return PackRecord(
        table,
        file,
        len(payload),
        digest,
        hashlib.sha256(payload[footer_start(payload) :]).hexdigest(),
        members,
        groups,
    )


def _group_ranges(meta: pq.FileMetaData, end: int) -> list[tuple[int, int]]:
    """(first byte, length) of each row group: its column chunks, which pyarrow writes one
    after the other; the groups tile the file from the magic to the footer."""
    ranges = []
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        starts, ends = [], []
        for c in range(group.num_columns):
            column = group.column(c)
            first = column.dictionary_page_offset or column.data_page_offset
            starts.append(first)
            ends.append(first + column.total_compressed_size)
        ranges.append((min(starts), max(ends) - min(starts)))
    at = 4
    for first, length in ranges:
        if first != at:
            raise ShardDamaged(ProblemKind.PACK_MISMATCH, "row groups do not follow each other")
        at = first + length
    if at != end:
        raise ShardDamaged(ProblemKind.PACK_MISMATCH, "bytes between the row groups and footer")
    return ranges


def members_in_footer(payload: bytes) -> list[tuple[str, int]]:
    """The members a pack's own footer names ([(key, rows)], in row order)."""
    meta = pq.read_metadata(pa.BufferReader(payload))
    raw = (meta.metadata or {}).get(PACK_KEY)
    if raw is None:
        raise ShardDamaged(ProblemKind.PACK_MISMATCH, "no member list in the footer")
    return [(str(k), int(n)) for k, n in json.loads(raw)]


def derive_record(payload: bytes, table: str, file: str) -> PackRecord:
    """The record of a pack from its own bytes (when the manifest is lost); the caller checks
    the seal first. Row groups are matched to members by their row counts."""
    listed = members_in_footer(payload)
    meta = pq.read_metadata(pa.BufferReader(payload))
    members, first = [], 0
    for key, n in listed:
        members.append(Member(key, first, n))
        first += n
    per_group, i = [], 0
    for g in range(meta.num_row_groups):
        rows, count = meta.row_group(g).num_rows, 0
        while rows > 0 and i < len(listed):
            rows -= listed[i][1]
            i, count = i + 1, count + 1
        if rows != 0:
            raise ShardDamaged(ProblemKind.PACK_MISMATCH, "a member spans two row groups")
        per_group.append(count)
    if i != len(listed) or first != meta.num_rows:
        raise ShardDamaged(ProblemKind.PACK_MISMATCH, "the member list does not cover the rows")
    return record_of(payload, table, file, tuple(members), per_group)


def compare(record: PackRecord, found: PackRecord) -> str | None:
    """How a pack's bytes differ from its manifest record (None: they do not)."""
    if found.size != record.size or found.sha256 != record.sha256:
        return f"{found.size} bytes with SHA-256 {found.sha256[:16]}..., recorded {record.size} "
    if found.members != record.members:
        return "its members are not the recorded ones"
    if found.row_groups != record.row_groups or found.footer_sha256 != record.footer_sha256:
        return "its row groups are not the recorded ones"
    return None


def intact_groups(payload: bytes, record: PackRecord) -> list[int] | None:
    """The row groups whose bytes match the record (None when the footer does not: then no
    row group can be decoded with confidence)."""
    if len(payload) < 12:
        return None
    start = footer_start(payload) if payload[-4:] == b"PAR1" else -1
    if start < 0 or hashlib.sha256(payload[start:]).hexdigest() != record.footer_sha256:
        return None
    return [
        i
        for i, g in enumerate(record.row_groups)
        if hashlib.sha256(payload[g.offset : g.offset + g.length]).hexdigest() == g.sha256
    ]


def decode_members(
    parquet: pq.ParquetFile,
    record: PackRecord,
    keys: Sequence[str] | None,
    schema: pa.Schema,
    columns: Sequence[str] | None = None,
) -> tuple[pa.Table, dict[str, tuple[int, int]]]:
    """The rows of the row groups holding the members `keys` (None: all), decoded (page CRCs
    verified when `parquet` was opened so; only `columns` if given), and where each of those
    members' rows are in them: {key: (first row, rows)}."""
    keyset = None if keys is None else set(keys)
    wanted = [m for m in record.members if keyset is None or m.key in keyset]
    groups = record.groups_of(m.key for m in wanted)
    fields = schema if columns is None else pa.schema([schema.field(c) for c in columns])
    if not groups:
        return fields.empty_table(), {m.key: (0, 0) for m in wanted}
    present = set(parquet.schema_arrow.names)
    try:
        data = parquet.read_row_groups(
            groups,
            columns=None if columns is None else [c for c in columns if c in present],
            use_threads=False,
        )
    except (OSError, ValueError, pa.ArrowException) as e:
        kind = ProblemKind.PAGE_CHECKSUM if "CRC" in str(e) else ProblemKind.UNREADABLE_ROWS
        raise ShardDamaged(kind, f"the rows do not decode: {e}") from e
    data = conform(data, fields)
    # where each decoded group's rows start, in the pack and in `data`
    pack_starts, data_starts, at = [], [], 0
    for g in groups:
        first, rows = record.group_rows[g]
        pack_starts.append(first)
        data_starts.append(at)
        at += rows
    if at != data.num_rows:
        raise ShardDamaged(ProblemKind.UNREADABLE_ROWS, f"{data.num_rows} rows, expected {at}")
    where = {}
    for m in wanted:
        i = max(bisect.bisect_right(pack_starts, m.first_row) - 1, 0)
        where[m.key] = (data_starts[i] + m.first_row - pack_starts[i], m.rows)
    return data, where


def read_members(
    parquet: pq.ParquetFile, record: PackRecord, keys: Sequence[str] | None, schema: pa.Schema
) -> list[tuple[str, pa.Table]]:
    """(key, rows) of the members `keys` (None: all), in key order (`decode_members`)."""
    data, where = decode_members(parquet, record, keys, schema)
    return [(key, data.slice(first, rows)) for key, (first, rows) in where.items()]
