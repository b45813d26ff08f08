"""A setting generated in several chunks records its engine's provenance once (issue 32): a
real tiny-model run through Ray and transformers, committed in three chunks, stores each library
and version once, as structured values; the report shows them once and `export --format eee`
names the engine's own version (transformers') as `inference_engine.version`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.cli import main

ROOT = Path(__file__).resolve().parents[2]
GRID = [
    "model=tiny",
    "benchmark.limit=3",
    "max_length=384",
    "template=instruct",
    "decoding=greedy",
    "checkpoint.every_samples=1",  # one problem per chunk: three chunks
    "cluster.num_cpus=2",
]


@pytest.fixture(scope="module")
def chunked_store(tmp_path_factory, cache_dir, shared_data) -> Path:
    store = tmp_path_factory.mktemp("provenance") / "store"
    env = {
        **os.environ,
        "REPROGRID_CACHE_DIR": str(cache_dir),
        "REPROGRID_DATA_DIR": str(shared_data),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
        "PYTHONPATH": str(ROOT),
    }
    cmd = [sys.executable, "-m", "orchestrator.cli", "run", *GRID, f"store={store}"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(list((store / "generations").glob("*~*.parquet"))) == 3
    return store


def installed() -> dict[str, list[str]]:
    return {name: [metadata.version(name)] for name in ("torch", "transformers")}


def test_the_settings_row_names_each_library_and_host_once(chunked_store):
    (row,) = pd.read_parquet(chunked_store / "settings").to_dict("records")
    assert row["status"] == "complete"
    assert json.loads(row["backend_versions_json"]) == installed()
    torch, transformers = (v[0] for v in installed().values())
    assert row["backend_version"] == f"torch {torch}, transformers {transformers}"
    assert [list(row[c]) for c in ("hostnames", "devices", "effective_dtypes")] == [
        [row["hostname"]],
        ["cpu"],
        ["float32"],
    ]
    assert len(row["node_ids"]) == 1 and row["node_id"] == row["node_ids"][0]


def test_report_and_eee_export_name_the_versions_once(chunked_store, env, tmp_path):
    torch, transformers = (v[0] for v in installed().values())
    args = ["report", "--store", str(chunked_store), "--format", "csv", "--out", str(tmp_path)]
    assert main(args) == 0
    (shown,) = pd.read_csv(tmp_path / "provenance_settings.csv").to_dict("records")
    assert shown["backend_version"] == f"torch {torch}, transformers {transformers}"
    out = tmp_path / "eee"
    assert (
        main(["export", "--store", str(chunked_store), "--format", "eee", "--out", str(out)]) == 0
    )
    (path,) = (out / "scores").rglob("*.json")
    record = json.loads(path.read_text())
    engine = record["model_info"]["inference_engine"]
    assert engine == {"name": "transformers", "version": transformers}
    details = record["source_metadata"]["additional_details"]
    assert details["device"] == "cpu" and "," not in details["hostname"]


def test_the_eee_records_pass_the_every_eval_ever_validator(chunked_store, env, tmp_path):
    core = pytest.importorskip("every_eval_ever.validator.validation_core")  # Python >= 3.12
    assert (
        main(["export", "--store", str(chunked_store), "--format", "eee", "--out", str(tmp_path)])
        == 0
    )
    root = tmp_path / "scores"
    files = sorted(root.rglob("*.json"))
    available = {str(p.relative_to(root)) for p in files}
    reports = [
        core.validate_file(
            p,
            repo_path=str(p.relative_to(root)),
            available_files=available,
            read_repo_file=lambda rel: (root / rel).read_text(),
            run_semantic_checks=True,
        )
        for p in files
    ]
    assert reports and all(r.valid and not r.warnings for r in reports), reports
