"""Fixtures for the InfiBench tests: the shared data folder, loaded suites, small cases."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from workers.benchmarks.infibench.suite import Case, load_dev_suite, load_suite, parse_case


@pytest.fixture(scope="session")
def infibench_dir(shared_data) -> Path:
    path = shared_data / "infibench"
    if not (path / "suite_v2.1.yaml").is_file():
        pytest.fail(f"InfiBench data not found under {path}; set REPROGRID_DATA_DIR")
    return path


@pytest.fixture(scope="session")
def v21_suite(infibench_dir):
    return load_suite(infibench_dir)


@pytest.fixture(scope="session")
def dev_suite(infibench_dir):
    return load_dev_suite(infibench_dir)


def make_case(
    grading: dict,
    *,
    lang: str = "python",
    files: dict[str, str] | None = None,
    case_id: str = "9-9-9",
    **fields,
) -> Case:
    """A one-off case from a `grading:` dict, parsed exactly like a suite file."""
    config = {
        "id": case_id,
        "prompt_path": f"prompt_{case_id}.txt",
        "type": "code completion",
        "lang": lang,
        **fields,
        "grading": grading,
    }
    return parse_case(
        f"cases/eval_{case_id}.yaml", yaml.safe_dump(config), "question?", files or {}
    )
