"""The name of a model's folder in the problems view: a hash of everything its files are made
of, so that a folder of that name already written holds them (orchestrator/report/view/folder.py
builds only the folders that are missing).

What enters it: VIEW_FORMAT (what the files hold and how the page reads them), the model, its
benchmark and label, every one of its settings' rows as the view shows them, and the identity
of every shard of theirs the view reads (generations and executions), as the table's one
listing gives it: a loose shard by its name, size and mtime_ns; a pack's member by its pack's
file name and its key (a pack is never rewritten under its name: storage/layout.py,
storage/manifest.py). A re-executed setting, a chunk added or a compaction changes its model's
name only; a model added to the store changes no other model's name.

Pure: rows and listings in, names out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from storage.integrity import setting_key_of
from storage.layout import TableView

# What a model's files hold and how the page reads them: raise it whenever either changes, so
# that every folder an older reprogrid wrote is built again rather than read by a newer page.
VIEW_FORMAT = 2
DIGEST_CHARS = 24  # hexadecimal characters of SHA-256 kept in a folder's name (96 bits)

ShardId = tuple[Any, ...]


def shard_ids(view: TableView) -> dict[str, list[ShardId]]:
    """Setting key -> the identities of the shards of `view` that hold its rows (a setting's
    whole shard and its chunks `<key>~<n>`), sorted."""
    out: dict[str, list[ShardId]] = {}
    for key, file in view.loose.items():
        identity = ("loose", file.name, file.size, file.mtime_ns)
        out.setdefault(setting_key_of(key), []).append(identity)
    for pack in view.packs:
        for member in pack.members:
            out.setdefault(setting_key_of(member.key), []).append(
                ("pack", pack.file.name, member.key)
            )
    for ids in out.values():
        ids.sort(key=repr)
    return out


def model_digest(
    model: str,
    benchmark: str,
    label: str,
    settings: Sequence[Mapping[str, Any]],
    shards: Sequence[Mapping[str, Sequence[ShardId]]],
) -> str:
    """The folder name of one model's view. `settings`: its rows as the view reads them, in
    the order the view shows them; `shards`: per table the view reads, `shard_ids` of it."""
    keys = [str(row["setting_key"]) for row in settings]
    payload = {
        "format": VIEW_FORMAT,
        "model": model,
        "benchmark": benchmark,
        "label": label,
        "settings": [dict(sorted(row.items())) for row in settings],
        "shards": [[list(map(list, table.get(key, ()))) for key in keys] for table in shards],
    }
    # canonical JSON: a value it cannot hold (a float NaN, an object) is an error, never a
    # text that could name two different inputs
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]
