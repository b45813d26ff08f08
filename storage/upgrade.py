"""Upgrading shards that an older schema version wrote: the writer rewrites each shard that
lacks a column added since, with today's schema (the new columns null) and sealed, so every
shard of a table has the same columns and types (what DuckDB or polars over a folder need).
The rows are read with the shard's checks first: a damaged shard is never "upgraded"."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq

from storage.errors import NotLockHolder
from storage.schema import TABLES, optional_columns
from storage.store import Store

logger = logging.getLogger(__name__)


def outdated(store: Store, table: str) -> list[str]:
    """Keys of the table's valid shards whose file lacks a column of today's schema."""
    wanted = optional_columns(TABLES[table])
    if not wanted:
        return []
    out = []
    for key, info in sorted(store.shards(table).items()):
        try:
            schema = pq.read_schema(pa.BufferReader(store.read_bytes(info.path)))
        except (OSError, pa.ArrowException):
            continue  # damaged or gone: the integrity checks deal with it, never an upgrade
        if wanted - set(schema.names):
            out.append(key)
    return out


def upgrade_shards(store: Store) -> int:
    """Rewrite every outdated shard of every table (the writer, holding the lock). Returns how
    many were rewritten; their rows are unchanged, the added columns null."""
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
    if n:
        logger.info("upgraded %d shard(s) written by an older schema version", n)
    return n
