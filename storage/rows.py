"""A table's rows read through the store: its loose shards and its packs' members, in
shard-key order, decoding only the row groups (and columns) asked for (`Store.read_table`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from storage.files import Files
from storage.integrity import ShardDamaged, setting_key_of
from storage.layout import TableView
from storage.manifest import PackRecord
from storage.packs import decode_members
from storage.schema import TABLES

logger = logging.getLogger(__name__)


def read_table(
    store: Files,
    table: str,
    keys: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
    within: TableView | None = None,
) -> pa.Table:
    """All readable shards of a table (optionally only those of `keys`: a setting's chunk
    shards `<key>~<chunk>` belong to its key; only `columns` if given), packs' members
    included, in shard-key order (a setting's whole shard, then its chunks in order). A
    listed shard that is gone, unreadable or damaged by the time it is read is left out.
    `within`: the table's view to read from (`Store.view`, of these keys at least)."""
    if within is not None and within.table != table:
        raise ValueError(f"a view of {within.table!r} given to read {table!r}")
    view = within if within is not None else store.view(table, keys=keys)
    keyset = None if keys is None else set(keys)
    schema = TABLES[table]
    fields = schema if columns is None else pa.schema([schema.field(c) for c in columns])

    def chosen(keys: Iterable[str]) -> list[str]:
        if keyset is None:
            return list(keys)
        return [k for k in keys if setting_key_of(k) in keyset]

    loose = sorted(chosen(view.loose))
    read = store.map_items(lambda k: store.read_shard(table, k, columns), loose)
    tables = dict(zip(loose, read, strict=True))
    sources: list[tuple[str, int]] = [(k, -1) for k, t in tables.items() if t is not None]
    decoded = {}
    for i, pack in enumerate(view.packs):
        members = chosen(m.key for m in pack.members)
        got = _decode_pack(store, pack.record, members, columns) if members else None
        if got is not None:
            decoded[i] = got
            sources += [(k, i) for k in got[1]]
    order = sorted(sources)
    if not order:
        return fields.empty_table()
    return _assembled(order, tables, decoded, columns)


def _decode_pack(
    store: Files, record: PackRecord, keys: Sequence[str], columns: Sequence[str] | None
) -> tuple[pa.Table, dict[str, tuple[int, int]]] | None:
    try:
        data, where = decode_members(
            store.open_pack(record), record, keys, TABLES[record.table], columns
        )
    except FileNotFoundError:
        return None
    except (ShardDamaged, OSError) as e:
        logger.warning(
            "damaged pack %s/%s (%s): its %d shard(s) treated as missing",
            record.table,
            record.file,
            e,
            len(keys),
        )
        return None
    return members_only(data, where)


def positions(indices: np.ndarray) -> pa.Array:
    """Row positions for `take`, wrapping the array's memory: pyarrow converts a NumPy array
    (pa.array, or one passed to take) through its pandas check, which imports pandas; a read
    needs none of it."""
    values = np.ascontiguousarray(indices, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def members_only(
    data: pa.Table, where: Mapping[str, tuple[int, int]]
) -> tuple[pa.Table, dict[str, tuple[int, int]]]:
    """The members' rows of decoded row groups, copied out (in pack order), and where each
    member's rows are in the copy; `data` itself when they are all of its rows.

    A reader asking for a few members of each pack (the problems view reads a model's 60
    settings, whose keys are hashes spread over every pack of a 100-model store) decodes most
    row groups of every pack for a small share of their rows. Copied out pack by pack, only one
    pack's row groups are held at a time, not every pack's."""
    spans = sorted(where.values())
    wanted = sum(n for _, n in spans)
    if wanted == data.num_rows:
        return data, dict(where)
    ranges = [np.arange(first, first + n) for first, n in spans if n]
    copied = data.take(positions(np.concatenate(ranges))) if ranges else data.slice(0, 0)
    starts, at = {}, 0
    for first, n in spans:
        starts[first] = at
        at += n
    return copied, {key: (starts[first], n) for key, (first, n) in where.items()}


# Slices of packs past which a read's rows are gathered by one `take` instead. Packs are cut
# model by model and setting keys are hashes: a whole table read in key order alternates packs
# at every member, and thousands of one-row slices cost more in time and memory than one take.
MAX_SLICES = 256

Packs = Mapping[int, tuple[pa.Table, dict[str, tuple[int, int]]]]


def _runs(
    order: Sequence[tuple[str, int]], loose: Mapping[str, pa.Table | None], packs: Packs
) -> list[tuple[int | str, int, int]]:
    """`order` ((shard key, -1 for a loose shard or the index of its pack)) as runs of rows:
    (pack, first row, end row) for consecutive members of one pack that lie next to each
    other, (key, 0, rows) for a loose shard."""
    runs: list[tuple[int | str, int, int]] = []
    for key, source in order:
        if source < 0:
            rows = loose[key]
            assert rows is not None
            runs.append((key, 0, rows.num_rows))
            continue
        first, n = packs[source][1][key]
        if runs and runs[-1][0] == source and runs[-1][2] == first:
            runs[-1] = (source, runs[-1][1], first + n)
        else:
            runs.append((source, first, first + n))
    return runs


def _assembled(
    order: Sequence[tuple[str, int]],
    loose: Mapping[str, pa.Table | None],
    packs: Packs,
    columns: Sequence[str] | None,
) -> pa.Table:
    """The rows of `order`, in its order: the runs' slices concatenated or, past MAX_SLICES
    slices of packs, taken in one pass from the decoded packs and loose shards laid end to end
    (a loose shard is a table of its own either way, so it does not count)."""

    def block(source: int | str) -> pa.Table:
        if isinstance(source, int):
            return packs[source][0]
        rows = loose[source]
        assert rows is not None
        return rows  # read with `columns` only

    runs = _runs(order, loose, packs)
    if sum(isinstance(source, int) for source, _, _ in runs) <= MAX_SLICES:
        parts = [block(source).slice(first, end - first) for source, first, end in runs]
        return pa.concat_tables(parts).combine_chunks()
    blocks: list[pa.Table] = []
    base: dict[int | str, int] = {}  # pack index or loose key -> its first row in the blocks
    at = 0
    for source, _, _ in runs:
        if source not in base:
            blocks.append(block(source))
            base[source], at = at, at + blocks[-1].num_rows
    starts = np.array([base[source] + first for source, first, _ in runs], dtype=np.int64)
    size = np.array([end - first for _, first, end in runs], dtype=np.int64)
    ends = np.cumsum(size)
    # row r of the result is row starts[i] + (r - (ends[i] - size[i])) of the blocks
    indices = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(starts - (ends - size), size)
    return pa.concat_tables(blocks).take(positions(indices)).combine_chunks()
