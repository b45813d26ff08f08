"""Upgrading shards that an older schema version wrote: the writer rewrites each shard that
lacks a column added since, with today's schema (the new columns null) and sealed, so every
shard of a table has the same columns and types (what DuckDB or polars over a folder need).
A pack is rewritten as a new pack of the same members. The rows are read with the shard's
checks first: a damaged shard is never "upgraded"."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq

from storage import packing
from storage.compact import DEFAULT_POLICY
from storage.errors import NotLockHolder
from storage.integrity import ShardDamaged
from storage.layout import LivePack
from storage.schema import TABLES, optional_columns
from storage.store import Store

logger = logging.getLogger(__name__)


def _lacks_columns(store: Store, path: str, wanted: frozenset[str]) -> bool:
    """Whether the file's schema (read from its footer) lacks a column of `wanted`; a file that
    does not read is left to the integrity checks, never upgraded."""
    try:
        with store.fs.open_input_file(path) as fh:
            schema = pq.read_schema(fh)
    except (OSError, pa.ArrowException):
        return False
    return bool(wanted - set(schema.names))


def outdated(store: Store, table: str) -> list[str]:
    """Keys of the table's loose shards whose file lacks a column of today's schema."""
    wanted = optional_columns(TABLES[table])
    if not wanted:
        return []
    loose = store.view(table).loose
    return [k for k, f in sorted(loose.items()) if _lacks_columns(store, f.path, wanted)]


def outdated_packs(store: Store, table: str) -> list[LivePack]:
    """The table's packs whose file lacks a column of today's schema."""
    wanted = optional_columns(TABLES[table])
    if not wanted:
        return []
    return [p for p in store.view(table).packs if _lacks_columns(store, p.file.path, wanted)]


def upgrade_shards(store: Store) -> int:
    """Rewrite every outdated shard of every table (the writer, holding the lock). Returns how
    many shards were rewritten (a pack's members counted one by one); their rows are unchanged,
    the added columns null."""
    if not store.holds_writer_lock:
        raise NotLockHolder(f"upgrading shards of {store.uri} needs the writer lock")
    n = 0
    for table in TABLES:
        for key in outdated(store, table):
            rows = store.read_shard(table, key)
            if rows is None:  # damaged: left to the quarantine
                continue
            store.write_table(table, key, rows)
            n += 1
        for pack in outdated_packs(store, table):
            try:
                members = store.read_pack(pack.record, [m.key for m in pack.members])
            except (ShardDamaged, OSError):
                continue  # damaged: left to the quarantine
            rows = DEFAULT_POLICY.group_rows(table)
            packing.pack_files(store, table, [members], [pack.file], rows)
            n += len(members)
    if n:
        logger.info("upgraded %d shard(s) written by an older schema version", n)
    return n
