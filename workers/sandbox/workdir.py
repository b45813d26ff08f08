"""The run's working folder: created with its files (owned by the slot uid as root), and
removed afterwards even if the program took away its own permissions."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

logger = logging.getLogger(__name__)


def make_workdir(files: Mapping[str, str | bytes], uid: int | None) -> str:
    """A fresh folder under the temporary directory holding `files`, owned by `uid` if given.
    Raises ValueError for a path that is absolute, empty or leaves the folder."""
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="reprogrid-sbx-"))
    try:
        for rel, content in files.items():
            target = _inside(workdir, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = (
                content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass")
            )
            target.write_bytes(data)
        if uid is not None:
            for dirpath, _, filenames in os.walk(workdir):
                os.lchown(dirpath, uid, uid)
                for name in filenames:
                    os.lchown(os.path.join(dirpath, name), uid, uid)
    except BaseException:
        remove_tree(workdir)
        raise
    return workdir


def _inside(workdir: str, rel: str) -> Path:
    path = Path(rel)
    if not path.parts or path.is_absolute() or ".." in path.parts:
        raise ValueError(
            f"sandbox file paths must be relative and stay inside the folder, got {rel!r}"
        )
    return Path(workdir, path)


def remove_tree(path: str) -> None:
    """Remove the folder even if the program took away its own permissions (root needs no fix)."""

    def reopen(func, failed, exc_info):
        for target in (os.path.dirname(failed), failed):
            if os.path.isdir(target) and not os.path.islink(target):
                try:
                    os.chmod(target, 0o700)
                except OSError:
                    pass

    for _ in range(8):  # each pass can unlock one more level of folders
        shutil.rmtree(path, onerror=reopen)
        if not os.path.lexists(path):
            return
    logger.warning("could not remove sandbox folder %s", path)
