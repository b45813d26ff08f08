"""The import directions of DESIGN.md, enforced with `ast` (STYLE rule 4, 10)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "transformers", "vllm", "bitsandbytes", "accelerate"}
PACKAGES = ("orchestrator", "workers", "storage")


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def roots(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


@pytest.mark.parametrize("path", modules("workers"), ids=lambda p: str(p.relative_to(ROOT)))
def test_workers_never_import_orchestrator(path):
    assert "orchestrator" not in roots(imports(path))


@pytest.mark.parametrize("path", modules("storage"), ids=lambda p: str(p.relative_to(ROOT)))
def test_storage_imports_nothing_of_the_project(path):
    assert not roots(imports(path)) & {"orchestrator", "workers"}


@pytest.mark.parametrize(
    "path",
    [p for pkg in PACKAGES for p in modules(pkg)],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_heavy_libraries_only_under_workers_backends(path):
    if path.is_relative_to(ROOT / "workers" / "backends"):
        return
    assert not roots(imports(path)) & HEAVY


@pytest.mark.parametrize(
    "path", [p for pkg in PACKAGES for p in modules(pkg)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_ray_only_in_dispatch_and_worker_tasks(path):
    allowed = {ROOT / "orchestrator" / "dispatch.py", ROOT / "workers" / "tasks.py"}
    if path in allowed:
        return
    assert "ray" not in roots(imports(path))


@pytest.mark.parametrize("path", modules("orchestrator"), ids=lambda p: str(p.relative_to(ROOT)))
def test_orchestrator_reaches_backends_only_lazily(path):
    """The driver may call a backend helper inside a command (e.g. a tokenizer for `prompts`),
    never at import time."""
    assert not any(n.startswith("workers.backends") for n in imports(path, top_level_only=True))


def test_importing_the_cli_loads_no_gpu_library():
    """Everything the driver runs (also as a Ray client on a laptop: docs/cluster.md) imports
    no GPU library; tests/integration/test_multinode.py runs a `ray://` driver without them."""
    code = (
        "import sys, orchestrator.cli, orchestrator.run.dispatch, orchestrator.run.runner,"
        " orchestrator.report.status, orchestrator.report.build, orchestrator.cli.report, orchestrator.report.planview,"
        " storage.store, storage.index, ray.util.client;"
        "heavy = sorted(m for m in ('torch','transformers','vllm','bitsandbytes')"
        " if m in sys.modules);"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
