"""Integration fixtures: a private cache folder with the tiny model built once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("reprogrid-cache")
    from workers.backends.modelprep import build_tiny_model

    build_tiny_model(path / "models" / "tiny-llama")
    return path


@pytest.fixture
def env(cache_dir, shared_data, monkeypatch) -> dict[str, str]:
    """Environment for a `reprogrid` subprocess (and this process) pointing at test folders."""
    monkeypatch.setenv("REPROGRID_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("REPROGRID_DATA_DIR", str(shared_data))
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    return dict(os.environ)
