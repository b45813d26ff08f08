"""`reprogrid export --format mlflow` into a local file tracking URI, read back with MLflow's own
client: one run per scored setting in one experiment, the axes and revision as parameters,
pass@1 with its interval and the counts as metrics, the setting key and run id as tags, the
harness generations.json as an artifact; a second export updates the same runs. Without
--tracking-uri: MLFLOW_TRACKING_URI, else a file store in the store's report folder (run in a
working folder and HOME of the test's own, so nothing lands outside its temporary folder).

Skipped when MLflow (the `mlflow` extra) is not installed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.cli.export import default_experiment
from orchestrator.tools.harness_io import export_entries
from storage.store import Store
from tests.fixtures_store import RUN_ID, write_synthetic_store

mlflow_tracking = pytest.importorskip("mlflow.tracking", reason="mlflow not installed")


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    specs = write_synthetic_store(str(root))
    complete = {k: s for k, s in specs.items() if s.status == "complete"}
    return str(root), complete


@pytest.fixture
def tracking(tmp_path, monkeypatch):
    # MLflow 3 keeps its file store in maintenance mode and refuses it unless told otherwise.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return (tmp_path / "mlruns").as_uri()


def export(store: str, uri: str, capsys) -> tuple[int, str, str]:
    code = main(["export", "--store", store, "--format", "mlflow", "--tracking-uri", uri])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_round_trip_one_run_per_setting_and_a_second_export_updates(store, tracking, capsys):
    root, complete = store
    code, out, err = export(root, tracking, capsys)
    assert code == 0, err
    assert f"{len(complete)} run(s) created, 0 updated" in out
    client = mlflow_tracking.MlflowClient(tracking_uri=tracking)
    experiment = client.get_experiment_by_name(default_experiment(root))
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    by_key = {r.data.tags["reprogrid.setting_key"]: r for r in runs}
    assert set(by_key) == set(complete) and len(runs) == len(complete)

    settings = {r["setting_key"]: r for r in Store(root).read_table("settings").to_pylist()}
    scores = {r["setting_key"]: r for r in Store(root).read_table("scores").to_pylist()}
    for key, run in by_key.items():
        params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
        setting = settings[key]
        for axis in (
            "template",
            "decoding",
            "max_length",
            "precision",
            "backend",
            "model_revision",
        ):
            assert params[axis] == str(setting[axis]), axis
        assert metrics["pass_at_1"] == pytest.approx(scores[key]["value"])
        assert metrics["pass_at_1_ci_low"] <= metrics["pass_at_1"] <= metrics["pass_at_1_ci_high"]
        assert metrics["n_passed"] == scores[key]["n_passed"]
        assert metrics["n_problems"] == 164
        assert tags["reprogrid.run_id"] == RUN_ID
        assert run.info.status == "FINISHED"
    key = sorted(complete)[0]
    path = client.download_artifacts(by_key[key].info.run_id, "harness/generations.json")
    with open(path, encoding="utf-8") as fh:
        assert json.load(fh) == export_entries(Store(root), key)

    code, out, _ = export(root, tracking, capsys)
    assert code == 0 and f"0 run(s) created, {len(complete)} updated" in out
    again = client.search_runs([experiment.experiment_id], max_results=1000)
    assert sorted(r.info.run_id for r in again) == sorted(r.info.run_id for r in runs)


def test_a_refused_file_store_says_what_to_do(store, tmp_path, monkeypatch, capsys):
    root, _ = store
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    code, out, err = export(root, (tmp_path / "refused").as_uri(), capsys)
    assert code == 2 and out == ""
    assert "MLFLOW_ALLOW_FILE_STORE=true" in err
    assert "--tracking-uri URI: a tracking server, http://HOST:5000" in err


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working folder and a HOME of the test's own and no MLflow variable: what an export
    writes outside the store's report folder lands here (MLflow's own default would be
    ./mlflow.db; its telemetry settings go to ~/.config/mlflow)."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE"):
        monkeypatch.delenv(name, raising=False)
    return cwd


def _runs(uri: str, root: str, monkeypatch) -> list:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # to read the file store back
    client = mlflow_tracking.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(default_experiment(root))
    assert experiment is not None
    return client.search_runs([experiment.experiment_id], max_results=1000)


def test_without_a_tracking_uri_the_runs_go_to_the_store_report_folder(
    store, elsewhere, capsys, monkeypatch
):
    root, complete = store
    code = main(["export", "--store", root, "--format", "mlflow"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    uri = (Path(root).parent / "store-report" / "mlruns").as_uri()
    assert captured.out.startswith(f"mlflow {uri}: experiment ")
    assert f"{len(complete)} run(s) created, 0 updated" in captured.out
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ  # allowed for the export only
    assert list(elsewhere.iterdir()) == []  # no ./mlflow.db
    assert len(_runs(uri, root, monkeypatch)) == len(complete)


def test_mlflow_tracking_uri_is_the_default_when_set(
    store, elsewhere, tmp_path, capsys, monkeypatch
):
    root, complete = store
    uri = (tmp_path / "tracked").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # a file store the user chose
    assert main(["export", "--store", root, "--format", "mlflow"]) == 0
    assert capsys.readouterr().out.startswith(f"mlflow {uri}: experiment ")
    assert not (Path(root).parent / "store-report").exists()
    assert len(_runs(uri, root, monkeypatch)) == len(complete)


def test_an_unsupported_uri_says_how_to_choose_another(store, elsewhere, capsys):
    root, _ = store
    code, out, err = export(root, "bogus://tracker", capsys)
    assert code == 2 and out == ""
    assert "MLflow at bogus://tracker" in err and "--tracking-uri URI" in err


def test_eee_still_needs_out(store, capsys):
    root, _ = store
    assert main(["export", "--store", root, "--format", "eee"]) == 2
    assert "export --format eee needs --out DIR" in capsys.readouterr().err
