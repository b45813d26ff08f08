"""A table's rows read through the store: its loose shards and its packs' members, in
shard-key order, decoding only the row groups (and columns) asked for (`Store.read_table`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from storage.integrity import ShardDamaged, setting_key_of
from storage.manifest import PackRecord
from storage.packs import decode_members
from storage.schema import TABLES

if TYPE_CHECKING:
    from storage.store import Store

logger = logging.getLogger(__name__)


def read_table(
    store: Store,
    table: str,
    keys: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """All readable shards of a table (optionally only those of `keys`: a setting's chunk
    shards `<key>~<chunk>` belong to its key; only `columns` if given), packs' members
    included, in shard-key order (a setting's whole shard, then its chunks in order). A
    listed shard that is gone, unreadable or damaged by the time it is read is left out."""
    view = store.view(table, keys=keys)
    keyset = None if keys is None else set(keys)
    schema = TABLES[table]
    fields = schema if columns is None else pa.schema([schema.field(c) for c in columns])

    def chosen(keys: Iterable[str]) -> list[str]:
        if keyset is None:
            return list(keys)
        return [k for k in keys if setting_key_of(k) in keyset]

    loose = sorted(chosen(view.loose))
    tables = dict(
        zip(loose, store.map_items(lambda k: store.read_shard(table, k), loose), strict=True)
    )
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
    if _slices(order, decoded) > MAX_SLICES:
        return _taken(order, tables, decoded, columns)
    return pa.concat_tables(_in_key_order(order, tables, decoded, columns)).combine_chunks()


def _decode_pack(
    store: Store, record: PackRecord, keys: Sequence[str], columns: Sequence[str] | None
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


def _positions(indices: np.ndarray) -> pa.Array:
    """Row positions for `take`, wrapping the array's memory: pyarrow converts a NumPy array
    (pa.array, or one passed to take) through its pandas check, which imports pandas, 40 MB
    of a `status` or a view worker that never uses it."""
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
    pack's row groups are held at a time: a peak of 107 MB in Arrow's pool became 29 MB for a
    batch of 600 settings of a 6,000-setting store."""
    spans = sorted(where.values())
    wanted = sum(n for _, n in spans)
    if wanted == data.num_rows:
        return data, dict(where)
    ranges = [np.arange(first, first + n) for first, n in spans if n]
    copied = data.take(_positions(np.concatenate(ranges))) if ranges else data.slice(0, 0)
    starts, at = {}, 0
    for first, n in spans:
        starts[first] = at
        at += n
    return copied, {key: (starts[first], n) for key, (first, n) in where.items()}


# Slices of a read past which its rows are gathered by one `take` instead. Packs are cut model
# by model and setting keys are hashes: a whole table read in key order alternates packs at
# every member. The settings and scores of 6,000 settings took 1.3 s and 274 MB as 5,000
# slices, 0.4 s and 177 MB taken (packs cut in key order: 6 slices, 0.4-0.6 s and 149 MB).
MAX_SLICES = 256


def _slices(
    order: Sequence[tuple[str, int]],
    packs: Mapping[int, tuple[pa.Table, dict[str, tuple[int, int]]]],
) -> int:
    """How many slices of packs `_in_key_order` would cut for `order` (without cutting them).
    A loose shard is a table of its own either way: 20,000 of them (a plan's generations) read
    slower taken than concatenated."""
    count, last = 0, None
    for key, source in order:
        if source < 0:
            last = None
            continue
        first, n = packs[source][1][key]
        if last is None or last != (source, first):
            count += 1
        last = (source, first + n)
    return count


def _taken(
    order: Sequence[tuple[str, int]],
    loose: Mapping[str, pa.Table | None],
    packs: Mapping[int, tuple[pa.Table, dict[str, tuple[int, int]]]],
    columns: Sequence[str] | None,
) -> pa.Table:
    """The rows of `order` (as `_in_key_order`'s slices hold them) taken in one pass from the
    decoded packs and loose shards laid end to end."""
    blocks: list[pa.Table] = []
    base: dict[object, int] = {}  # pack index or loose key -> its first row in the blocks
    at = 0
    for key, source in order:
        if source < 0 or source not in base:
            rows = loose[key] if source < 0 else packs[source][0]
            assert rows is not None
            blocks.append(rows if source >= 0 or columns is None else rows.select(list(columns)))
            base[key if source < 0 else source] = at
            at += rows.num_rows
    starts, lengths = [], []
    for key, source in order:
        if source < 0:
            rows = loose[key]
            assert rows is not None
            starts.append(base[key])
            lengths.append(rows.num_rows)
        else:
            first, n = packs[source][1][key]
            starts.append(base[source] + first)
            lengths.append(n)
    size = np.array(lengths, dtype=np.int64)
    ends = np.cumsum(size)
    # row r of the result is row starts[i] + (r - (ends[i] - size[i])) of the blocks
    indices = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(
        np.array(starts, dtype=np.int64) - (ends - size), size
    )
    return pa.concat_tables(blocks).take(_positions(indices)).combine_chunks()


def _in_key_order(
    order: Sequence[tuple[str, int]],
    loose: Mapping[str, pa.Table | None],
    packs: Mapping[int, tuple[pa.Table, dict[str, tuple[int, int]]]],
    columns: Sequence[str] | None,
) -> list[pa.Table]:
    """The tables of `order` ((shard key, -1 for a loose shard or the index of its pack)), with
    consecutive members of one pack that lie next to each other taken as one slice."""
    parts: list[pa.Table] = []
    run: list[int] | None = None  # [pack, first row, end row] of the slice being extended

    def flush() -> None:
        if run is not None:
            parts.append(packs[run[0]][0].slice(run[1], run[2] - run[1]))

    for key, source in order:
        if source < 0:
            flush()
            run = None
            rows = loose[key]
            assert rows is not None
            parts.append(rows if columns is None else rows.select(list(columns)))
            continue
        first, n = packs[source][1][key]
        if run is not None and run[0] == source and run[2] == first:
            run[2] = first + n
        else:
            flush()
            run = [source, first, first + n]
    flush()
    return parts
