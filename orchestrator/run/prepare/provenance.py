"""Provenance of a run: library versions, git revision, host. Read without importing the
libraries (the driver must not import torch or vllm)."""

from __future__ import annotations

import json
import platform
import socket
from importlib import metadata
from pathlib import Path

from workers.backends.registry import backend_definitions

# The driver's own libraries; each backend's definition names its own (`distributions`).
LIBRARIES = ("ray", "hydra-core", "pandas", "pyarrow", "numpy", "reprogrid")


def library_versions() -> dict[str, str]:
    """The installed version of every library a run's results can depend on, by distribution
    name (a library not installed here is left out)."""
    versions = {"python": platform.python_version()}
    backends = [name for d in backend_definitions() for name in d.distributions]
    for name in dict.fromkeys([*backends, *LIBRARIES]):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def library_versions_json() -> str:
    return json.dumps(library_versions(), sort_keys=True)


def git_revision(start: Path | None = None) -> str | None:
    """HEAD's commit of the checkout this code runs from, read from .git (no subprocess)."""
    here = (start or Path(__file__)).resolve()
    for folder in [here, *here.parents]:
        git = folder / ".git"
        if git.is_dir():
            head = (git / "HEAD").read_text().strip()
            if not head.startswith("ref: "):
                return head
            ref = head[5:]
            ref_file = git / ref
            if ref_file.is_file():
                return ref_file.read_text().strip()
            packed = git / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
            return None
    return None


def hostname() -> str:
    return socket.gethostname()
