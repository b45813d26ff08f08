"""The weights check: built, local, cached, downloadable, and the failures kept apart (no
network / repository not found / revision not found / gated), each naming repo and revision.

The Hub cases use huggingface_hub's real requests and exceptions: HF_ENDPOINT points at a local
server that answers as the Hub does (hub_server.py beside this file) or at a closed port.
huggingface_hub reads HF_ENDPOINT, HF_HUB_CACHE and HF_HUB_OFFLINE when it is imported, so
those checks run in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.run.preflight.weights import WeightsStatus, check_weights, looks_like_path
from tests.unit.orchestrator.run.preflight.hub_server import COMMIT, hub_server
from workers.spec import ModelSpec, Tuning

ROOT = Path(__file__).resolve().parents[4]
CHECK = """
import json, sys
from orchestrator.run.preflight.weights import check_all
from workers.spec import ModelSpec, Tuning
rows = json.loads(sys.argv[1])
models = [ModelSpec(n, r, v, "f", 1.0, Tuning.BASE, "instruct") for n, r, v in rows]
print(json.dumps([[c.status.value, c.detail] for c in check_all(models, 5.0)]))
"""


def model(repo_id: str, revision: str = "main", builder: str | None = None) -> ModelSpec:
    return ModelSpec("m", repo_id, revision, "f", 1.0, Tuning.BASE, "instruct", builder=builder)


def check_in_fresh_interpreter(models, endpoint: str, cache: Path, offline: bool = False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(cache), PYTHONPATH=str(ROOT))
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(models)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return [(WeightsStatus(s), detail) for s, detail in json.loads(done.stdout)]


def test_a_builder_model_is_always_available(tmp_path):
    check = check_weights(model(str(tmp_path / "absent"), builder="tiny"), 1.0)
    assert check.status is WeightsStatus.BUILT_OFFLINE and check.available


def test_a_local_folder_is_present_or_missing(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert check_weights(model(str(tmp_path)), 1.0).status is WeightsStatus.LOCAL
    missing = check_weights(model(str(tmp_path / "nope")), 1.0)
    assert missing.status is WeightsStatus.LOCAL_MISSING and not missing.available
    assert str(tmp_path / "nope") in missing.detail


@pytest.mark.parametrize(
    ("repo_id", "is_path"),
    [
        ("org/name", False),
        ("name", False),
        ("/abs/folder", True),
        ("./rel", True),
        ("a/b/c", True),
        ("~/models/x", True),
    ],
)
def test_looks_like_path(repo_id, is_path):
    assert looks_like_path(repo_id) is is_path


def test_hub_answers_are_told_apart_and_name_repo_and_revision(tmp_path):
    repos = {"org/present": {"main"}}
    with hub_server(repos, gated={"org/gated"}) as endpoint:
        got = check_in_fresh_interpreter(
            [
                ("a", "org/present", "main"),
                ("b", "org/missing", "main"),
                ("c", "org/present", "v9"),
                ("d", "org/gated", "main"),
            ],
            endpoint,
            tmp_path / "hub",
        )
    statuses = [s for s, _ in got]
    assert statuses == [
        WeightsStatus.DOWNLOADABLE,
        WeightsStatus.REPO_NOT_FOUND,
        WeightsStatus.REVISION_NOT_FOUND,
        WeightsStatus.GATED,
    ]
    assert "org/missing" in got[1][1] and "revision main" in got[1][1]
    assert "revision v9 not found in repository org/present" in got[2][1]
    assert "org/gated" in got[3][1] and "HF_TOKEN" in got[3][1]


def test_no_network_is_its_own_error(tmp_path):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    closed = probe.getsockname()[1]
    probe.close()
    got = check_in_fresh_interpreter(
        [("a", "org/present", "main")], f"http://127.0.0.1:{closed}", tmp_path / "hub"
    )
    status, detail = got[0]
    assert status is WeightsStatus.NO_NETWORK
    assert "org/present at revision main" in detail and "cannot be reached" in detail
    offline = check_in_fresh_interpreter(
        [("a", "org/present", "main")], f"http://127.0.0.1:{closed}", tmp_path / "hub", True
    )
    assert offline[0][0] is WeightsStatus.NO_NETWORK and "HF_HUB_OFFLINE" in offline[0][1]


def write_snapshot(cache: Path, repo_id: str, files: dict[str, str]) -> Path:
    """An HF cache entry as huggingface_hub lays it out: refs/main -> snapshots/<commit>/."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for name, text in files.items():
        (snapshot / name).write_text(text)
    return snapshot


def test_a_complete_snapshot_in_the_cache_needs_no_network(tmp_path):
    cache = tmp_path / "hub"
    write_snapshot(cache, "org/single", {"config.json": "{}", "model.safetensors": "x"})
    index = json.dumps({"weight_map": {"a": "s-1.safetensors", "b": "s-2.safetensors"}})
    write_snapshot(
        cache,
        "org/sharded",
        {
            "config.json": "{}",
            "model.safetensors.index.json": index,
            "s-1.safetensors": "x",
            "s-2.safetensors": "x",
        },
    )
    write_snapshot(
        cache,
        "org/partial",
        {"config.json": "{}", "model.safetensors.index.json": index, "s-1.safetensors": "x"},
    )
    got = check_in_fresh_interpreter(
        [("a", "org/single", "main"), ("b", "org/sharded", "main"), ("c", "org/partial", "main")],
        "http://127.0.0.1:1",
        cache,
        offline=True,
    )
    assert [s for s, _ in got] == [
        WeightsStatus.CACHED,
        WeightsStatus.CACHED,
        WeightsStatus.NO_NETWORK,
    ]
