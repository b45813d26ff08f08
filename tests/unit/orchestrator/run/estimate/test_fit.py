"""What cannot run on the cluster `plan` sizes blocks it (exit 2) and names what would fit,
in the text, on stderr and in `plan --json` alike; the replicas that would shorten the wall time
are suggested (orchestrator/run/estimate/fit.py and sizing.py). `--estimate-only` keeps the Hub
out of these runs, so they answer the same with and without a network."""

from __future__ import annotations

import json

import pytest

from orchestrator.cli import main
from orchestrator.run.config.load import load_run_config
from orchestrator.run.estimate.estimator import plan_json
from orchestrator.run.plan.state import make_plan
from orchestrator.run.preflight.checks import preflight
from orchestrator.run.prepare.prepared import prepare
from storage.store import Store

BIG = ["model=deepseekcoder-33b-instruct", "benchmark.limit=2"]  # num_gpus: 2


def plan_cli(capsys, tmp_path, *args: str) -> tuple[int, str, str]:
    code = main(["plan", "--estimate-only", *args, f"store={tmp_path / 'store'}"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_33b_on_one_gpu_exits_2_naming_what_would_fit(env, capsys, tmp_path):
    code, out, err = plan_cli(capsys, tmp_path, *BIG, "precision=bf16,fp32", "cluster.gpus=1")
    assert code == 2
    bf16 = (
        "hardware: deepseekcoder-33b-instruct hf bf16/none: needs 2 GPUs and the cluster has 1 "
        "(cluster.gpus=1); would fit: cluster.gpus=2 (more GPUs); model.num_gpus=1 (one "
        "replica, 71.2 GB, fits one a100-80gb)"
    )
    fp32 = (
        "hardware: deepseekcoder-33b-instruct hf fp32/none: needs 2 GPUs and the cluster has 1 "
        "(cluster.gpus=1); would fit: cluster.gpus=2 (more GPUs); precision=int8 or int4 with "
        "model.num_gpus=1 (a quantization: one replica 38.2 or 21.7 GB)"
    )
    assert "2 blocking problem(s)" in err and bf16 in err and fp32 in err
    assert "BLOCKING (2):" in out and bf16 in out and fp32 in out
    assert "none: every engine needs more GPUs than that (BLOCKING below)" in out
    assert "wall time 0s" not in out
    # --json carries the same facts
    code, out, _ = plan_cli(capsys, tmp_path, "--json", *BIG, "precision=bf16", "cluster.gpus=1")
    data = json.loads(out)
    assert code == 2 and data["preflight"]["blocking"] == 1
    [problem] = data["preflight"]["problems"]
    assert problem["severity"] == "blocking" and "would fit: cluster.gpus=2" in problem["message"]
    assert data["fit_problems"] == [problem]
    assert data["cluster"]["unplaceable"] and data["preflight"]["weights_checked"] is False
    # two GPUs: it runs
    code, out, err = plan_cli(capsys, tmp_path, *BIG, "precision=bf16", "cluster.gpus=2")
    assert code == 0, err
    assert "BLOCKING" not in out and "wall time on 2 GPU(s) (cluster.gpus=2): " in out


def test_the_plans_problem_replaces_the_hardware_checks_own(env, capsys, tmp_path):
    # a local instance with one GPU: preflight's hardware check finds the same engine
    code, out, _ = plan_cli(
        capsys, tmp_path, "--json", *BIG, "precision=bf16", "cluster.num_gpus=1"
    )
    data = json.loads(out)
    assert code == 2
    [problem] = data["preflight"]["problems"]
    assert problem["kind"] == "hardware" and "would fit: cluster.gpus=2" in problem["message"]
    assert "this cluster: 1 GPU(s)" in problem["message"]


def test_weights_larger_than_the_named_gpu_block(env, capsys, tmp_path):
    args = ["model=codellama-13b-base", "benchmark.limit=2", "precision=fp32,bf16"]
    code, out, err = plan_cli(capsys, tmp_path, *args, "estimate.gpu=a100-40gb")
    assert code == 2 and "1 blocking problem(s)" in err
    assert (
        "memory: codellama-13b-base hf fp32/none: weights 52.0 GB exceed one a100-40gb (40 GB "
        "each; estimate.gpu=a100-40gb); would fit: model.num_gpus=2 (more GPUs); precision=int8 "
        "or int4 (a quantization: one replica 16.7 or 10.2 GB); estimate.gpu=a100-80gb or any "
        "GPU of 80 GB or more (a larger GPU)"
    ) in err
    assert "bf16/none: weights" not in err  # 26 GB fit
    code, _, err = plan_cli(capsys, tmp_path, *args, "estimate.gpu=a100-80gb")
    assert code == 0, err


def test_weights_larger_than_an_assumed_gpu_are_a_warning(env, tmp_path):
    # no GPU named anywhere: the a100-80gb is assumed, and the cluster's may be larger
    overrides = [*BIG, "precision=fp32", "model.num_gpus=1", "cluster.num_gpus=0"]
    prepared = prepare(load_run_config([*overrides, f"store={tmp_path}"]))
    store = Store(str(tmp_path))
    plan = make_plan(store, prepared)
    data = plan_json(plan, prepared, store, preflight(prepared, plan, weights=False))
    assert data["preflight"]["blocking"] == 0
    [warning] = data["warnings"]
    assert warning.startswith("deepseekcoder-33b-instruct hf fp32/none: weights 132.0 GB exceed")
    assert "would fit: model.num_gpus=2 (more GPUs)" in warning
    assert warning.endswith("the GPU is assumed: set estimate.gpu to the cluster's")
    assert [p["severity"] for p in data["fit_problems"]] == ["warning"]


# paper60 on a 7B model, two problems, on five H200s (sizing.py's test grid)
SEVEN = [
    "model=deepseekcoder-6.7b-instruct",
    "grid=paper60",
    "benchmark.limit=2",
    "estimate.gpu=h200",
    "cluster.gpus=5",
]


def cluster_of(tmp_path, *overrides: str) -> dict:
    prepared = prepare(load_run_config([*SEVEN, *overrides, f"store={tmp_path}"]))
    store = Store(str(tmp_path))
    return plan_json(make_plan(store, prepared), prepared, store)["cluster"]


@pytest.mark.parametrize("seeds", ["harness", "per_sample"])
def test_replicas_that_shorten_the_wall_time_are_suggested(env, tmp_path, seeds):
    now = cluster_of(tmp_path, f"seed_policy={seeds}")
    hint = now["replicas_hint"]
    assert hint is not None and hint["makespan_s"] < 0.95 * now["makespan_s"]
    # what it promises is what planning with it gives
    taken = cluster_of(tmp_path, f"seed_policy={seeds}", f"cluster.replicas={hint['replicas']}")
    assert taken["makespan_s"] == pytest.approx(hint["makespan_s"])
    assert taken["gpu_hours"] == pytest.approx(hint["gpu_hours"])
    # each harness-seeded sampled setting is a stream of its own, so both seedings share a
    # unit's settings over its replicas alike; each unit runs as many as fit the H200 (the
    # fp32 one 4 of 8), and 8 is the most plan tries
    assert hint["replicas"] == 8
    assert taken["replicas_hint"] is None


def test_no_replicas_are_suggested_without_a_cluster_size(env, tmp_path):
    assert cluster_of(tmp_path, "cluster.gpus=null", "cluster.num_gpus=0")["replicas_hint"] is None
