"""Compute nodes without internet (issue 35, item 4): `reprogrid stage` on a "login node"
downloads a grid's model revision into HF_HOME with huggingface_hub's real download code, from
a local server standing in for the Hub that serves the tiny model's files (tests/hub_repos.py);
`plan` then finds the weights in the HF cache, and a real run on the transformers path with
HF_HUB_OFFLINE=1 (and the Hub gone) loads them from there: its programs equal those of the same
model loaded from its folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.hub_repos import hub_with_repos
from tests.unit.orchestrator.run.preflight.hub_server import closed_port

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
REPO = "reprogrid-test/tiny-llama"
# the tiny model, as a Hub model at a branch: the config of a model the compute nodes download
AS_HUB_MODEL = ["model=tiny", f"model.repo_id={REPO}", "model.revision=main", "model.builder=null"]
GRID = ["benchmark.limit=3", "max_length=384", "template=instruct", "cluster.num_cpus=2"]
# what a repository holds that no backend loads: a second copy of the weights, other formats
NOT_LOADED = {"pytorch_model.bin": b"\0" * 64, "flax_model.msgpack": b"\0" * 64}
COLUMNS = ["task_id", "sample_index", "continuation", "program"]


def reprogrid(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )


@pytest.fixture
def repo(cache_dir, tmp_path) -> Path:
    """The tiny model's folder as a repository, with files a backend does not load."""
    folder = tmp_path / "repo"
    shutil.copytree(cache_dir / "models" / "tiny-llama", folder)
    for name, data in NOT_LOADED.items():
        (folder / name).write_bytes(data)
    return folder


def hf_env(env: dict[str, str], hf_home: Path, endpoint: str) -> dict[str, str]:
    """`env` with only HF_HOME and HF_ENDPOINT of huggingface_hub's variables, and no proxy."""
    clean = {k: v for k, v in env.items() if not k.startswith("HF_") and "proxy" not in k.lower()}
    return {**clean, "HF_HOME": str(hf_home), "HF_ENDPOINT": endpoint, "PYTHONPATH": str(ROOT)}


def generations(store: Path) -> pd.DataFrame:
    frame = pd.read_parquet(store / "generations", columns=COLUMNS)
    return frame.sort_values(COLUMNS[:2]).reset_index(drop=True)


def test_a_staged_revision_is_planned_as_cached_and_runs_offline(env, repo, tmp_path):
    hf_home = tmp_path / "hf-home"
    with hub_with_repos({REPO: repo}) as hub:
        login = hf_env(env, hf_home, hub.endpoint)
        staged = reprogrid(["stage", *AS_HUB_MODEL, "--json"], login)
        assert staged.returncode == 0, staged.stderr
        [model] = json.loads(staged.stdout)["models"]
        fetched_once = {k: n for k, n in hub.requests.items() if k.startswith("GET ")}
        again = reprogrid(["stage", *AS_HUB_MODEL], login)
        fetched_twice = {k: n for k, n in hub.requests.items() if k.startswith("GET ")}
    assert again.returncode == 0 and ": staged" in again.stdout, again.stderr

    # the revision's files a backend loads, in HF_HOME's cache, the branch recorded as its commit
    snapshot = Path(model["detail"])
    assert model["status"] == "staged" and snapshot.parent.name == "snapshots"
    assert snapshot.is_relative_to(hf_home / "hub")
    expected = sorted(p.name for p in repo.iterdir() if p.name not in NOT_LOADED)
    assert sorted(p.name for p in snapshot.iterdir()) == expected == model["files"]
    assert (snapshot.parents[1] / "refs" / "main").read_text() == snapshot.name == model["commit"]
    for name in expected:  # the served bytes
        assert (snapshot / name).read_bytes() == (repo / name).read_bytes()
    weights = f"GET /{REPO}/resolve/{snapshot.name}/model.safetensors"
    assert fetched_once[weights] == 1 and fetched_twice[weights] == 1  # not fetched again

    # a compute node: the same HF_HOME, offline, and the Hub unreachable anyway
    node = {**hf_env(env, hf_home, f"http://127.0.0.1:{closed_port()}"), "HF_HUB_OFFLINE": "1"}
    plan = reprogrid(["plan", "--json", *AS_HUB_MODEL, *GRID], node)
    assert plan.returncode == 0, plan.stderr
    [check] = json.loads(plan.stdout)["preflight"]["weights"]
    assert (check["status"], check["detail"]) == ("in the HF cache", str(snapshot))

    offline_store, folder_store = tmp_path / "offline", tmp_path / "folder"
    run = reprogrid(["run", *AS_HUB_MODEL, *GRID, f"store={offline_store}"], node)
    assert run.returncode == 0, run.stderr
    settings = pd.read_parquet(offline_store / "settings")
    assert list(settings.model_repo_id) == [REPO] and list(settings.status) == ["complete"]
    # the same weights from the model's own folder: the same programs
    run = reprogrid(["run", "model=tiny", *GRID, f"store={folder_store}"], {**env, **os.environ})
    assert run.returncode == 0, run.stderr
    pd.testing.assert_frame_equal(generations(offline_store), generations(folder_store))


def test_a_revision_the_hub_lacks_is_an_error_naming_it(env, repo, tmp_path):
    with hub_with_repos({REPO: repo}) as hub:
        login = hf_env(env, tmp_path / "hf-home", hub.endpoint)
        done = reprogrid(["stage", *AS_HUB_MODEL, "model.revision=v9"], login)
    assert done.returncode == 2, done.stderr
    assert f"tiny: failed: revision v9 not found in repository {REPO}" in done.stderr
    assert not list((tmp_path / "hf-home").rglob("model.safetensors"))
