"""How many samples of each setting the store already holds (`plan`'s generated_samples).

A setting's generations are one shard `<setting_key>.parquet` or chunk shards
`<setting_key>~<n>.parquet` (storage.integrity.setting_key_of maps either to its setting). Rows
are counted from each shard's Parquet footer, which is a small read even on an object store.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection

import pyarrow as pa
import pyarrow.parquet as pq

from storage.integrity import setting_key_of
from storage.store import ShardInfo, Store

logger = logging.getLogger(__name__)


def shard_rows(store: Store, shard: ShardInfo) -> int:
    """Rows of one shard by its footer; 0 for a shard whose footer does not read (verify and
    the next run deal with it)."""
    try:
        with store.fs.open_input_file(shard.path) as fh:
            return pq.read_metadata(fh).num_rows
    except (OSError, pa.ArrowException) as e:
        logger.warning("generations shard %s unreadable (%s): counted as 0 rows", shard.key, e)
        return 0


def stored_sample_counts(store: Store, setting_keys: Collection[str]) -> dict[str, int]:
    """Generation rows per setting key, over all its shards (settings without any: absent)."""
    wanted = set(setting_keys)
    shards = [s for k, s in store.shards("generations").items() if setting_key_of(k) in wanted]
    counts: Counter[str] = Counter()
    rows = store.map_items(lambda s: shard_rows(store, s), shards)
    for shard, n in zip(shards, rows, strict=True):
        counts[setting_key_of(shard.key)] += n
    return dict(counts)
