"""Imports inside functions (the CLI's commands, the tools' backend helpers) are only executed
when a command runs; this checks that every one of them names a module and attribute that
exist, so a moved module cannot leave a command broken until someone runs it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def lazy_imports() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted((ROOT / "orchestrator").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    for alias in node.names:
                        found.append((str(path.relative_to(ROOT)), node.module, alias.name))
    return sorted(set(found))


@pytest.mark.parametrize(("where", "module", "name"), lazy_imports())
def test_lazy_import_resolves(where, module, name):
    if module.split(".")[0] not in ("orchestrator", "workers", "storage"):
        pytest.skip("third-party")
    imported = importlib.import_module(module)
    assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}"), (
        f"{where}: from {module} import {name}"
    )
