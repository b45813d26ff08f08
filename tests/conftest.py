"""Shared fixtures. The data folder comes from REPROGRID_DATA_DIR (the Makefile and .ci/run set
it to ../shared/data); without it, the sibling `shared/data` of the checkout is used."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    configured = os.environ.get("REPROGRID_DATA_DIR")
    path = Path(configured) if configured else REPO_ROOT.parent / "shared" / "data"
    if not (path / "humanevalpack-python.jsonl").is_file():
        pytest.fail(f"HumanEvalPack data not found under {path}; set REPROGRID_DATA_DIR")
    return path


def pytest_configure(config) -> None:
    """Without REPROGRID_DATA_DIR, the sibling folder the fixtures use is the one the project's
    own config reads too (a report reads its card's literature through `paths.data_dir`):
    set for the session, so that an in-process command and a fixture never disagree."""
    if not os.environ.get("REPROGRID_DATA_DIR"):
        fallback = REPO_ROOT.parent / "shared" / "data"
        if (fallback / "humanevalpack-python.jsonl").is_file():
            os.environ["REPROGRID_DATA_DIR"] = str(fallback)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return data_dir()


@pytest.fixture(scope="session")
def problem_set(shared_data):
    from workers.benchmarks.humanevalfix.data import load_jsonl

    return load_jsonl(shared_data / "humanevalpack-python.jsonl")


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """A private cache folder with the tiny model built once per session."""
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
