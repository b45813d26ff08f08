"""The quarantine: where the writer moves a damaged, unreadable or foreign file, never deleting
it (docs/store.md, "Quarantine").

`<root>/quarantine/<table>/<UTC stamp>-<id>/<file name>` with a `_reason.json` beside it (the
problem, the shard and setting, the size, where it went and when). The folder is beside the
tables, so no table reader sees it. `Store.quarantine` checks the writer lock and calls `move`.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pyarrow.fs as pafs

from storage.layout import StoredFile

logger = logging.getLogger(__name__)

QUARANTINE_DIR = "quarantine"  # <root>/quarantine/<table>/<stamp>/<name>, next to the tables
REASON_FILE = "_reason.json"  # beside each quarantined file


def move(fs: pafs.FileSystem, root: str, file: StoredFile, reason: Mapping[str, Any]) -> str:
    """Move `file` into the quarantine with its reason record; the new path relative to
    `root`."""
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    relative = f"{QUARANTINE_DIR}/{file.table}/{stamp}/{file.name}"
    target = f"{root}/{relative}"
    fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
    record = {
        **reason,
        "table": file.table,
        "file": file.name,
        "size": file.size,
        "quarantined_at": datetime.now(UTC).isoformat(),
        "moved_to": relative,
    }
    reason_path = f"{root}/{QUARANTINE_DIR}/{file.table}/{stamp}/{REASON_FILE}"
    with fs.open_output_stream(reason_path) as out:
        out.write(json.dumps(record, indent=2, sort_keys=True).encode())
    fs.move(file.path, target)
    logger.warning(
        "quarantined %s/%s -> %s: %s",
        file.table,
        file.name,
        relative,
        reason.get("detail") or reason.get("kind"),
    )
    return relative


def keep(
    fs: pafs.FileSystem, root: str, name: str, payload: bytes, reason: Mapping[str, Any]
) -> str:
    """Keep a copy of a store-level file (the manifest) in the quarantine, with its reason
    record, before the writer replaces it; the copy's path relative to `root`."""
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    relative = f"{QUARANTINE_DIR}/store/{stamp}/{name}"
    fs.create_dir(f"{root}/{QUARANTINE_DIR}/store/{stamp}", recursive=True)
    with fs.open_output_stream(f"{root}/{relative}") as out:
        out.write(payload)
    record = {
        **reason,
        "table": None,
        "file": name,
        "size": len(payload),
        "quarantined_at": datetime.now(UTC).isoformat(),
        "moved_to": relative,
    }
    with fs.open_output_stream(f"{root}/{QUARANTINE_DIR}/store/{stamp}/{REASON_FILE}") as out:
        out.write(json.dumps(record, indent=2, sort_keys=True).encode())
    logger.warning("kept the store's %s in the quarantine: %s", name, relative)
    return relative


def records(fs: pafs.FileSystem, root: str) -> list[dict[str, Any]]:
    """Every `_reason.json` in the quarantine, oldest first (an unreadable one is logged)."""
    selector = pafs.FileSelector(f"{root}/{QUARANTINE_DIR}", allow_not_found=True, recursive=True)
    found = []
    for info in fs.get_file_info(selector):
        if info.type != pafs.FileType.File or info.base_name != REASON_FILE:
            continue
        try:
            with fs.open_input_stream(info.path) as stream:
                found.append(json.loads(stream.read().decode()))
        except (OSError, ValueError) as e:
            logger.warning("quarantine record %s unreadable: %s", info.path, e)
    return sorted(found, key=lambda r: str(r.get("quarantined_at", "")))
