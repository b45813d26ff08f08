"""The GPU tests import torch and transformers at module level (their skip needs
`torch.cuda.is_available()`): a run whose `-m` expression leaves out `gpu` tests does not
collect these modules at all, so that it does not pay torch's import for tests it deselects."""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.mark.expression import Expression


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    expression = config.getoption("markexpr") or ""
    if not expression or not collection_path.name.startswith("test_"):
        return None
    # every test here is marked gpu and nothing else: would the expression select one?
    selects_gpu = Expression.compile(expression).evaluate(lambda name, **_: name == "gpu")
    return True if not selects_gpu else None
