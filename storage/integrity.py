"""How a shard is sealed when it is written and checked before it is trusted (docs/store.md).

Every shard carries two checksums:
- a SHA-256 of the whole file, recorded in its own Parquet footer (key `reprogrid.sha256`). The
  writer encodes the file with a 64-byte placeholder where the digest goes, hashes the file and
  writes the digest over the placeholder; a check puts the placeholder back and hashes again.
  So every byte of the file is covered (data pages, page headers, dictionaries, the footer, its
  length and magic), and the digest itself is covered by the comparison. The seal lives in the
  file, so it is committed by the same rename as the data and goes wherever the file goes.
- Parquet page checksums (a CRC32 per page, `write_page_checksum`), verified whenever rows are
  decoded here (`page_checksum_verification`); other Parquet readers can verify them too.

A shard written before seals existed has neither: it is trusted by its page checksums if it has
them, else by decoding it fully (`Trust`). This module works on bytes only; the store does I/O.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa
import pyarrow.parquet as pq

from storage.errors import StoreError
from storage.schema import optional_columns

VERSION_KEY = b"reprogrid.schema_version"  # in every shard reprogrid ever wrote
CHECKSUM_KEY = b"reprogrid.sha256"
SEAL_KEY = b"reprogrid.checksum"
SEAL = b"sha256-file-v1"  # what the digest covers; a new scheme gets a new value
PLACEHOLDER = b"." * 64  # not hex, so it can never be mistaken for a digest
MAGIC = b"PAR1"
CHUNK_SEPARATOR = "~"  # `<setting_key>~<chunk>`: a chunk of a setting's results
# `pack-<stamp>-<id>.parquet`: a compacted file holding many shards (storage/packs.py). No shard
# key starts with it (setting keys are hex, run ids start with a date), so the two never meet.
PACK_PREFIX = "pack-"
_DIGEST = re.compile(rb"[0-9a-f]{64}")
_THRIFT_I32 = 5  # compact-protocol type id of an i32 field


class Trust(StrEnum):
    """Why a readable shard is trusted."""

    SHA256 = "sha256"  # its recorded SHA-256 matched (its pages also carry CRCs)
    PAGE_CRC = "page_crc"  # no recorded checksum; decoded with every page's CRC verified
    FULL_READ = "full_read"  # no checksum at all (older writer): decoded fully, nothing more
    # Checked by the last compaction and unchanged since (same size and mtime): what `status`
    # and `plan` trust without reading the file (the writer and `verify` read every byte).
    RECORDED = "recorded"


class ProblemKind(StrEnum):
    TRUNCATED = "truncated"  # the file does not end with a Parquet footer
    UNREADABLE = "unreadable"  # no Parquet header, or the footer does not parse
    CHECKSUM_MISMATCH = "checksum_mismatch"  # the file's SHA-256 is not the recorded one
    CHECKSUM_RECORD = "checksum_record"  # the footer's checksum record is incomplete or unknown
    PAGE_CHECKSUM = "page_checksum"  # a page's CRC does not match its data
    SCHEMA_MISMATCH = "schema_mismatch"  # column names or types differ from the table's schema
    UNREADABLE_ROWS = "unreadable_rows"  # the footer reads but the rows do not decode
    KEY_MISMATCH = "key_mismatch"  # rows of another setting (or run) than the file name says
    FOREIGN_FILE = "foreign_file"  # not named like a shard, or not written by reprogrid
    TEMPORARY_FILE = "temporary_file"  # left by an interrupted write (invisible to readers)
    READ_FAILED = "read_failed"  # an I/O error: counted as absent now, never quarantined
    MISSING_RESULT = "missing_result"  # a setting marked complete has no shard in this table
    MANIFEST = "manifest"  # the store's manifest does not read or fails its checksum
    MISSING_FILE = "missing_file"  # a pack the manifest names is not there
    PACK_MISMATCH = "pack_mismatch"  # a pack is not the one the manifest records (bytes, rows)
    # A file whose rows are also in a pack (a compaction or dissolve cut short): readers of the
    # store skip it, plain Parquet readers count its rows twice; the next writer removes it.
    COMPACTION_LEFTOVER = "compaction_leftover"


# Kinds that mean the file itself is bad (or not ours): the writer moves it to quarantine.
QUARANTINED = frozenset(ProblemKind) - {
    ProblemKind.TEMPORARY_FILE,  # removed by `Store.clean_temp` instead
    ProblemKind.READ_FAILED,  # the file may be fine; the network was not
    ProblemKind.MISSING_RESULT,  # nothing to move
    ProblemKind.MISSING_FILE,  # nothing to move: the writer drops the record
    ProblemKind.MANIFEST,  # the writer sets it aside itself and derives one from the packs
    ProblemKind.COMPACTION_LEFTOVER,  # the writer finishes the compaction instead
}


class ShardDamaged(StoreError):
    """A shard's bytes fail a check; `kind` says which."""

    def __init__(self, kind: ProblemKind, detail: str):
        super().__init__(f"{kind.value}: {detail}")
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class ShardVerdict:
    trust: Trust
    num_rows: int
    sha256: str | None = None  # the seal a sealed file carries (what a manifest records)


def setting_key_of(shard_key: str) -> str:
    """The setting a result shard belongs to: the key itself, or the part before the first
    CHUNK_SEPARATOR for a chunk `<setting_key>~<chunk>` (setting keys are hex, never "~")."""
    setting, separator, chunk = shard_key.partition(CHUNK_SEPARATOR)
    if not setting or (separator and not chunk):
        raise ValueError(
            f"shard key {shard_key!r} is neither <setting_key> nor <setting_key>"
            f"{CHUNK_SEPARATOR}<chunk>"
        )
    return setting


def is_shard_key(key: str) -> bool:
    """Whether `key` may name a shard: not empty, no "/", not hidden from Parquet readers (".",
    "_"), not a pack's name, and a chunk suffix, if any, not empty."""
    if not key or "/" in key or key.startswith((".", "_", PACK_PREFIX)):
        return False
    try:
        setting_key_of(key)
    except ValueError:
        return False
    return True


def seal(
    data: pa.Table,
    row_groups: Sequence[int] | None = None,
    footer: Mapping[bytes, bytes] | None = None,
) -> bytes:
    """The Parquet file of `data` (zstd, page CRCs) with its SHA-256 in its footer.
    `row_groups`: the rows of each row group, in order (default: one, up to Parquet's size
    limit); `footer`: more footer key-value metadata."""
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, data.schema, compression="zstd", write_page_checksum=True) as w:
        if row_groups is None:
            w.write_table(data)
        else:
            if sum(row_groups) != data.num_rows:
                raise StoreError(f"row groups of {sum(row_groups)} rows for {data.num_rows} rows")
            start = 0
            for n in row_groups:
                w.write_table(data.slice(start, n), row_group_size=max(n, 1))
                start += n
        # Footer key-value metadata only (not the Arrow schema the footer embeds), so the
        # placeholder occurs exactly once in the footer.
        w.add_key_value_metadata({**(footer or {}), SEAL_KEY: SEAL, CHECKSUM_KEY: PLACEHOLDER})
    payload = sink.getvalue().to_pybytes()
    at = _find_once(payload, PLACEHOLDER)
    if at is None:
        raise StoreError("sealing a shard: the checksum placeholder is not once in its footer")
    digest = _digest(payload, at)
    return payload[:at] + digest + payload[at + len(digest) :]


def inspect(
    payload: bytes,
    schema: pa.Schema,
    decode: bool = False,
    columns: Sequence[str] | None = None,
) -> tuple[ShardVerdict, pa.Table | None]:
    """Check a shard's bytes against `schema`; raises ShardDamaged. A sealed shard is checked by
    its SHA-256 (and decoded only with `decode`); an unsealed one is always decoded whole (with
    page CRCs verified where it has them). Returns the verdict and the rows when decoded: only
    `columns` (in that order) if given. A sealed shard decodes only those: its checksum covers
    every byte (a generations shard's token ids are most of its decoding)."""
    if len(payload) < 12 or payload[-4:] != MAGIC:
        raise ShardDamaged(ProblemKind.TRUNCATED, f"{len(payload)} bytes, no Parquet footer")
    if payload[:4] != MAGIC:
        raise ShardDamaged(ProblemKind.UNREADABLE, "no Parquet magic at the start")
    try:
        # One footer parse for the checks and the decode (it costs as much as decoding a small
        # shard); the decode reads an Arrow-owned copy (`arrow_owned`).
        source = arrow_owned(payload) if decode else payload
        parquet = pq.ParquetFile(pa.BufferReader(source), page_checksum_verification=True)
        meta, file_schema = parquet.metadata, parquet.schema_arrow
    except (OSError, ValueError, pa.ArrowException) as e:
        raise ShardDamaged(ProblemKind.UNREADABLE, f"the Parquet footer does not parse: {e}") from e
    sealed = _check_seal(payload, meta.metadata or {})
    _check_schema(file_schema, schema)
    if sealed:
        trust = Trust.SHA256
    else:
        trust = Trust.PAGE_CRC if _has_page_crc(payload, meta) else Trust.FULL_READ
    rows = None
    if decode or not sealed:
        shown = schema if columns is None else pa.schema([schema.field(c) for c in columns])
        source = parquet if decode else _owned_file(payload)
        if sealed and columns is not None:
            rows = _decode(source, shown, meta.num_rows, only=True)
        else:
            rows = conform(_decode(source, schema, meta.num_rows), shown)
    digest = (meta.metadata or {}).get(CHECKSUM_KEY) if sealed else None
    return ShardVerdict(trust, meta.num_rows, digest.decode() if digest else None), rows


def _find_once(payload: bytes, needle: bytes) -> int | None:
    """The position of `needle` in the footer when it occurs there exactly once."""
    footer_start = len(payload) - 8 - struct.unpack("<I", payload[-8:-4])[0]
    at = payload.find(needle, max(footer_start, 4))
    if at < 0 or payload.find(needle, at + 1) >= 0:
        return None
    return at


def _digest(payload: bytes, at: int) -> bytes:
    """SHA-256 (hex) of `payload` with the 64 bytes at `at` read as the placeholder."""
    view = memoryview(payload)
    h = hashlib.sha256(view[:at])
    h.update(PLACEHOLDER)
    h.update(view[at + len(PLACEHOLDER) :])
    return h.hexdigest().encode()


def _check_seal(payload: bytes, kv: dict[bytes, bytes]) -> bool:
    """True when the recorded SHA-256 matches; False when the file has no record (older
    writer); raises when the record is partial, unknown or does not match."""
    seal_value, digest = kv.get(SEAL_KEY), kv.get(CHECKSUM_KEY)
    if seal_value is None and digest is None:
        if VERSION_KEY not in kv:
            # Every reprogrid writer recorded the schema version; without it the file is from
            # another program, or a flipped bit dropped the footer's key-value list.
            raise ShardDamaged(
                ProblemKind.FOREIGN_FILE,
                f"no {VERSION_KEY.decode()} in the footer: not written by reprogrid, or the "
                "footer is damaged",
            )
        if _footer_names_a_seal(payload):
            # A flipped bit in the count of the footer's key-value list can drop the seal's
            # entries while the footer still parses: the file would pass for an unsealed one of
            # an older writer, whose footer never holds these names.
            raise ShardDamaged(
                ProblemKind.CHECKSUM_RECORD,
                "the footer holds a checksum record its metadata does not list",
            )
        return False
    if seal_value != SEAL or digest is None or not _DIGEST.fullmatch(digest):
        raise ShardDamaged(
            ProblemKind.CHECKSUM_RECORD,
            f"checksum record {seal_value!r}/{digest!r}; expected {SEAL!r} and a SHA-256",
        )
    at = _find_once(payload, digest)
    if at is None:
        raise ShardDamaged(ProblemKind.CHECKSUM_RECORD, "the recorded SHA-256 is not in the footer")
    actual = _digest(payload, at)
    if actual != digest:
        raise ShardDamaged(
            ProblemKind.CHECKSUM_MISMATCH,
            f"SHA-256 {actual.decode()[:16]}..., recorded {digest.decode()[:16]}...",
        )
    return True


def _footer_names_a_seal(payload: bytes) -> bool:
    footer_start = len(payload) - 8 - struct.unpack("<I", payload[-8:-4])[0]
    start = max(footer_start, 4)
    return payload.find(SEAL_KEY, start) >= 0 or payload.find(CHECKSUM_KEY, start) >= 0


def _check_schema(found: pa.Schema, expected: pa.Schema) -> None:
    """Same column names with the same types (order and metadata aside): one type per column
    in every shard, so a dataset over the folder reads with the table's types."""
    got = {f.name: f.type for f in found}
    want = {f.name: f.type for f in expected}
    if got == want:
        return
    # a shard written before a column was added lacks it (it reads as null)
    missing = sorted(set(want) - set(got) - optional_columns(expected))
    extra = sorted(set(got) - set(want))
    retyped = sorted(
        f"{n}: {got[n]} (expected {want[n]})" for n in set(got) & set(want) if got[n] != want[n]
    )
    parts = [
        f"missing {missing}" if missing else "",
        f"extra {extra}" if extra else "",
        f"types {retyped}" if retyped else "",
    ]
    if any(parts):
        raise ShardDamaged(ProblemKind.SCHEMA_MISMATCH, "; ".join(p for p in parts if p))


def arrow_owned(payload: bytes) -> pa.Buffer:
    """A copy of `payload` in Arrow's own memory. `pq.read_table` scans on Arrow's thread pool,
    and a pool thread may drop the last reference to its source after the call returns. Over
    Python bytes that release needs the GIL, and a pool thread that asks for it while the
    interpreter exits aborts the whole process (seen once as a driver's exit code -6 after a
    complete run); an Arrow-owned buffer is freed without the GIL."""
    out = pa.BufferOutputStream()
    out.write(payload)
    return out.getvalue()


def _owned_file(payload: bytes) -> pq.ParquetFile:
    return pq.ParquetFile(pa.BufferReader(arrow_owned(payload)), page_checksum_verification=True)


def _decode(
    parquet: pq.ParquetFile, schema: pa.Schema, num_rows: int, only: bool = False
) -> pa.Table:
    """The rows as `schema`; `only`: decode only the columns of `schema` (else every column of
    the file, each page's CRC verified where it has one)."""
    # ParquetFile.read, not pq.read_table: the dataset machinery behind read_table costs a few
    # milliseconds per call, which is most of the time on a small shard.
    present = set(parquet.schema_arrow.names)
    wanted = [n for n in schema.names if n in present] if only else None  # older: fewer columns
    try:
        read = parquet.read(wanted, use_threads=False)
    except (OSError, ValueError, pa.ArrowException) as e:
        kind = ProblemKind.PAGE_CHECKSUM if "CRC" in str(e) else ProblemKind.UNREADABLE_ROWS
        raise ShardDamaged(kind, f"the rows do not decode: {e}") from e
    if read.num_rows != num_rows:
        raise ShardDamaged(
            ProblemKind.UNREADABLE_ROWS, f"{read.num_rows} rows decoded, footer says {num_rows}"
        )
    return conform(read, schema)


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """`rows` with exactly `schema`: its columns in the schema's order, a column an older shard
    lacks as nulls, and no file metadata (the types were checked by `_check_schema`)."""
    present = set(rows.schema.names)
    columns = [
        rows.column(f.name) if f.name in present else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _has_page_crc(payload: bytes, meta: pq.FileMetaData) -> bool:
    """Whether the first page header carries a CRC (a writer sets it on every page or none).
    A PageHeader (parquet.thrift) opens with i32 fields 1-3 (type, sizes) and the optional i32
    field 4 (crc), in the Thrift compact protocol: a byte (field-id delta << 4 | type), then a
    varint."""
    if meta.num_row_groups == 0 or meta.num_columns == 0:
        return False
    column = meta.row_group(0).column(0)
    pos = column.dictionary_page_offset or column.data_page_offset
    field = 0
    for _ in range(4):
        if pos >= len(payload):
            return False
        head = payload[pos]
        pos += 1
        if head >> 4 == 0 or head & 0x0F != _THRIFT_I32:
            return False  # stop byte, long-form header or a non-i32 field: no crc in 1-4
        field += head >> 4
        if field >= 4:
            return field == 4
        while pos < len(payload) and payload[pos] & 0x80:
            pos += 1
        pos += 1
    return False
