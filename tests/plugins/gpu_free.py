"""A pytest plugin for the driver tier (`make test-driver`): an environment without any GPU
library (no torch, transformers or tokenizers: the core package and the `infibench`, `test` and
`eee` extras). Tests that need the tiny model (the `cache_dir` fixture, through `env` too) or
that assert on the transformers backend skip there with a reason instead of failing; wherever
those libraries are installed, this plugin changes nothing.

Loaded by name (`-p gpu_free`, with this folder on PYTHONPATH) rather than from a conftest, so
that the tier can run the suite from outside the checkout against the installed wheel.
"""

from __future__ import annotations

import importlib.util

import pytest

GPU_LIBRARIES = ("torch", "transformers", "tokenizers")
# Fixtures that build the tiny model (transformers + tokenizers).
MODEL_FIXTURES = frozenset({"cache_dir"})
# Tests that need the transformers backend without asking for a fixture: the tiny-model command
# and `doctor`, which reports the backends as available.
NEEDS_HF_BACKEND = frozenset(
    {
        "test_tiny_model_command_builds_a_loadable_folder",
        "test_doctor_lists_backends_sandbox_and_executors",
    }
)


def missing_gpu_libraries() -> list[str]:
    return [name for name in GPU_LIBRARIES if importlib.util.find_spec(name) is None]


def pytest_collection_modifyitems(config, items):
    missing = missing_gpu_libraries()
    if not missing:
        return
    reason = f"needs a GPU library ({', '.join(missing)} not installed: the driver tier)"
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & MODEL_FIXTURES or item.originalname in NEEDS_HF_BACKEND:
            item.add_marker(pytest.mark.skip(reason=reason))
