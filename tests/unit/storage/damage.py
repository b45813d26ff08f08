"""Ways to damage a shard's bytes, for the integrity tests (local and object stores).

Each function takes a Parquet file's bytes and returns damaged bytes; the page functions locate
their target with the file's own metadata, so the damage lands where it is meant to."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def footer_start(payload: bytes) -> int:
    """Where the footer (Thrift FileMetaData) begins: data pages end here."""
    return len(payload) - 8 - struct.unpack("<I", payload[-8:-4])[0]


def column_chunk(payload: bytes, column: str, row_group: int = 0) -> tuple[int, int]:
    """(first byte, size) of a column chunk: its dictionary page (if any) and data pages."""
    meta = pq.read_metadata(pa.BufferReader(payload))
    # a nested column's leaf is `<name>.list.element`
    names = [meta.schema.column(i).path.split(".")[0] for i in range(meta.num_columns)]
    chunk = meta.row_group(row_group).column(names.index(column))
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    return start, chunk.total_compressed_size


def flip_data_page_bit(payload: bytes, column: str, bit: int = 3) -> bytes:
    """Flip one bit of the last byte of `column`'s chunk: the last byte of its last data page's
    compressed values (a page header always precedes its data, so this is never a header)."""
    start, size = column_chunk(payload, column)
    at = start + size - 1
    assert 4 <= at < footer_start(payload), (at, footer_start(payload))
    damaged = bytearray(payload)
    damaged[at] ^= 1 << bit
    return bytes(damaged)


def garbage_in_data(payload: bytes, n: int = 400, seed: int = 0) -> bytes:
    """Overwrite `n` bytes in the middle of the data pages with random bytes (footer intact)."""
    end = footer_start(payload)
    assert end - 4 > n, f"a data region of {end - 4} bytes is too small for {n} bytes of garbage"
    at = 4 + (end - 4 - n) // 2
    rng = np.random.default_rng(seed)
    garbage = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    damaged = payload[:at] + garbage + payload[at + n :]
    assert damaged != payload and len(damaged) == len(payload)
    return damaged


def truncate(payload: bytes) -> bytes:
    """The first half of the file (a write cut short, the footer lost)."""
    return payload[: len(payload) // 2]
