"""A backend the project does not ship runs through the unchanged driver on a real local Ray:
registered in this process only, its class reaches the worker by the path the driver's
registry gives (tests/unit/workers/backends/toy_backend.py), its options reach the engine, and
its results are stored and exported under its own name."""

from __future__ import annotations

import json

import pandas as pd

from orchestrator.cli import main
from orchestrator.cli.export import engine_names_from_registry
from tests.conftest import REPO_ROOT
from tests.unit.workers.backends.toy_backend import DEFAULT_ANSWER
from workers.backends import registry


def test_a_third_backend_runs_through_the_unchanged_driver(env, capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(registry.BACKENDS, "toy", "tests.unit.workers.backends.toy_backend:TOY")
    # The local Ray's workers inherit this process's environment: they import the toy from here.
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    store = tmp_path / "store"
    args = ["model=tiny", "backend=toy", "benchmark.limit=3", "template=instruct"]
    code = main(["run", *args, "precision=fp32,int4", "cluster.num_cpus=2", f"store={store}"])
    out = capsys.readouterr()
    assert code == 0, out.err
    settings = pd.read_parquet(store / "settings")
    assert sorted(zip(settings.precision, settings.status, strict=True)) == [
        ("fp32", "complete"),
        ("int4", "skipped"),
    ]
    done = settings[settings.status == "complete"].iloc[0]
    assert done.backend == "toy" and json.loads(done.setting_json)["engine"]["toy_answer"]
    generations = pd.read_parquet(store / "generations")
    assert len(generations) == 3 and set(generations.continuation) == {DEFAULT_ANSWER}
    scores = pd.read_parquet(store / "scores")
    assert scores.pass_at_1.tolist() == [0.0]  # `return None` fixes no bug
    assert engine_names_from_registry()["toy"] == "toy-engine"
