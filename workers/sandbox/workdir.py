"""Host work folders, used only where the host gives no mount namespace ("process" mode): the
fork server names them `reprogrid-sbx-<server pid>-<n>` under the temporary directory, the
run's supervisor creates and removes them, and `sweep_stale_workdirs` removes those whose
server is gone (a server killed with its driver). With namespaces the work folder is a tmpfs
of the run's own mount namespace and leaves nothing on the host.

Standard library only (imported by the fork server, see server.py).
"""

from __future__ import annotations

import logging
import os
import re
import shutil

logger = logging.getLogger(__name__)

_NAME = re.compile(r"reprogrid-sbx-(\d+)-\d+$")


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


def sweep_stale_workdirs(tempdir: str) -> list[str]:
    """Remove the work folders under `tempdir` whose server process no longer exists; returns
    what was removed."""
    removed: list[str] = []
    try:
        names = os.listdir(tempdir)
    except OSError:
        return removed
    for name in names:
        match = _NAME.match(name)
        if match and not _alive(int(match.group(1))):
            path = os.path.join(tempdir, name)
            remove_tree(path)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
