"""`plan` as text: where each engine runs, which estimates are measured and which are the
model, the blocking problems (rendered from plan_json data), and a damaged setting as a `redo`
(through `reprogrid plan` on a store with a bit flip in a settings shard)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli import main
from orchestrator.report.screens.planview import render_plan
from storage.store import Store
from tests.unit.storage.damage import flip_data_page_bit


def engine(basis: str, placement_reason: str, device: str = "cpu") -> dict:
    return {
        "engine_key": "e",
        "model": "m",
        "backend": "hf",
        "dtype": "bf16",
        "quant": "none",
        "num_gpus": 1,
        "placement": "cpu",
        "placement_reason": placement_reason,
        "estimated_s": 3700.0,
        "estimated_gpu_hours": 1.5,
        "basis": basis,
        "device": device,
        "model_estimate": {},
        "settings": [
            {
                "setting_key": "k" * 64,
                "action": "generate",
                "reason": None,
                "template": "instruct",
                "decoding": "greedy",
                "max_length": 2048,
                "precision": "bf16",
                "generated_samples": 3,
                "total_samples": 164,
            }
        ],
    }


def plan_data(engines: list[dict], basis: str, problems: list[dict] = ()) -> dict:
    return {
        "n_settings": 1,
        "n_keys": 1,
        "counts": {"done": 0, "generate": 1, "execute": 0, "skip": 0, "failed": 0},
        "engine_loads": 1,
        "generations": 164,
        "n_problems": 164,
        "estimated_s": 3700.0 * len(engines),
        "estimated_gpu_hours": 1.5 * len(engines),
        "estimate_basis": basis,
        "estimate": {
            "gpu": "a100-80gb",
            "gpu_source": "assumed (no GPU named here)",
            "gpu_bandwidth_gbps": 2039.0,
            "cpu_bandwidth_gbps": 20.0,
            "output_tokens_prior": 200,
        },
        "warnings": [],
        "preflight": {
            "cluster": {"address": None, "endpoint": None, "error": None, "reachable": None},
            "gpus": {"count": 0, "names": [], "source": "no nvidia-smi", "detail": ""},
            "weights": [
                {
                    "model": "m",
                    "repo_id": "r",
                    "revision": "main",
                    "status": "in the HF cache",
                    "detail": "/cache/r",
                }
            ],
            "hardware": [],
            "problems": list(problems),
            "blocking": len(problems),
        },
        "engines": engines,
    }


def test_a_gpu_less_machine_never_shows_a_bare_gpu():
    reason = "needs 1 GPU(s), none here: runs on CPU (cluster.cpu_if_no_gpus=true)"
    text = render_plan(plan_data([engine("model", reason)], "model"))
    assert "(1 GPU)" not in text
    assert (
        f"engine m hf bf16/none ({reason}) 1.5 GPU-h; on this machine ~1h01m on cpu "
        "[estimate (model)]"
    ) in text
    assert "GPUs here: 0 [no nvidia-smi]" in text
    assert "3/164 samples" in text


def test_measured_and_model_are_told_apart():
    both = [engine("measured", "1 of 1 GPU(s)", "h200"), engine("model", "1 of 1 GPU(s)", "h200")]
    text = render_plan(plan_data(both, "mixed"))
    assert "(measured for 1 engine(s), estimate (model) for 1)" in text
    assert "[measured]" in text and "[estimate (model)]" in text
    assert "GPU-hours: 3.0 on a100-80gb (measured for 1 engine(s)" in text
    assert "on this machine (h200), one engine at a time: 2h03m" in text
    assert "GPU a100-80gb, 2039 GB/s: assumed" in text


def test_blocking_problems_are_listed():
    problem = {
        "kind": "weights",
        "severity": "blocking",
        "subject": "m",
        "message": "repository org/x (revision main) not found on the Hub",
    }
    text = render_plan(plan_data([engine("model", "r")], "model", [problem]))
    assert "BLOCKING (1):\n  weights: repository org/x (revision main) not found" in text
    assert "weights m: in the HF cache (/cache/r)" in text


def cluster(gpus: int | None, makespan: float | None, source: str) -> dict:
    return {
        "gpus": gpus,
        "gpus_source": source,
        "gpu": "h200",
        "replicas": 4,
        "gpu_hours": 1.2,
        "longest_unit_s": 3000.0,
        "makespan_s": makespan,
        "lower_bound_s": 3000.0 if makespan else None,
        "unplaceable": [],
    }


def test_the_wall_time_on_the_cluster_and_each_units_replicas():
    row = engine("model", "1 of 1 GPU(s)", "h200")
    row.update(cluster_s=2400.0, replicas_running=4, replica_gain=3.5)
    data = plan_data([row], "model")
    data["cluster"] = cluster(64, 3100.0, "cluster.gpus=64")
    text = render_plan(data)
    assert (
        "wall time on 64 GPU(s) (cluster.gpus=64): 51m40s (lower bound 50m00s: the work over "
        "the GPUs, or a unit's load and its longest harness-seeded setting)"
    ) in text
    assert "on the cluster 40m00s with 4 replica(s), x3.5; on this machine ~1h01m on h200" in text
    row.update(instances=3, start_s=0.0, end_s=1500.0)
    data["cluster"] |= {"instances": 3, "more_gpus": [more(128, 1800.0, 1.3)]}
    text = render_plan(data)
    assert "x3.5 (one instance); 3 instances from 0s to 25m00s" in text
    assert "  3 engine instances for 1 engines: long units run on several GPUs" in text
    assert "  more GPUs (cluster.gpus=N) would shorten it to 128: 30m00s (1.3 GPU-hours)" in text
    data["cluster"] = cluster(None, None, "no GPUs here: set cluster.gpus=N to size a cluster")
    assert (
        "wall time: not sized (no GPUs here: set cluster.gpus=N to size a cluster); the longest "
        "unit 50m00s"
    ) in render_plan(data)


def more(gpus: int, makespan: float, hours: float) -> dict:
    return {"replicas": 4, "gpus": gpus, "makespan_s": makespan, "gpu_hours": hours}


def test_the_fast_path_is_priced_beside_the_grid():
    data = plan_data([engine("model", "1 of 1 GPU(s)", "h200")], "model")
    data["cluster"] = cluster(8, 3100.0, "cluster.gpus=8")
    overrides = ["backend=auto", "seed_policy=per_sample"]
    data["fast_path"] = {
        "overrides": overrides,
        "gpus": 8,
        "makespan_s": 600.0,
        "gpu_hours": 1.25,
        "skipped": 2,
        "settings": 60,
    }
    assert (
        "  the fast path (backend=auto seed_policy=per_sample): 10m00s on 8 GPU(s), 1.2 "
        "GPU-hours, 2 setting(s) skipped (its sampled outputs are not the harness's)"
    ) in render_plan(data)
    data["fast_path"] = {"overrides": overrides, "error": "grid.backend is a grid axis"}
    assert "the fast path (backend=auto seed_policy=per_sample): not sized (grid.backend" in (
        render_plan(data)
    )
    data["fast_path"] = None  # the grid is the fast path already
    assert "the fast path" not in render_plan(data)


def test_the_headline_leads_with_the_gpu_figures_and_labels_this_machine():
    data = plan_data([engine("model", "needs 1 GPU(s), none here: runs on CPU")], "model")
    data["cluster"] = cluster(8, 3100.0, "cluster.gpus=8")
    lines = render_plan(data).splitlines()
    assert lines[2] == "GPU-hours: 1.5 on a100-80gb, cluster.replicas=4 (estimate (model))"
    assert lines[3].startswith("wall time on 8 GPU(s) (cluster.gpus=8): 51m40s")
    assert lines[5] == "on this machine (cpu), one engine at a time: 1h01m"
    assert not any("one device at a time" in line for line in lines)
    # a remote cluster: no engine runs here, so the serial time is not this machine's
    remote = engine("model", "needs 1 GPU(s); checked when Ray connects", "a100-80gb")
    remote["placement"] = "unknown"
    text = render_plan(plan_data([remote], "model"))
    assert "on one a100-80gb, one engine at a time: 1h01m" in text and "this machine" not in text


def test_replicas_that_would_shorten_the_wall_time_are_suggested():
    data = plan_data([engine("model", "1 of 8 GPU(s)", "h200")], "model")
    data["cluster"] = cluster(8, 3100.0, "cluster.gpus=8")
    assert "would shorten" not in render_plan(data)  # no hint: nothing suggested
    data["cluster"]["replicas_hint"] = {"replicas": 8, "makespan_s": 1500.0, "gpu_hours": 0.6}
    assert (
        "  cluster.replicas=8 would shorten it to 25m00s (0.6 GPU-hours; docs/cost.md, "
        '"Replicas and the cluster")'
    ) in render_plan(data)


def test_engines_that_need_more_gpus_are_left_out_of_the_wall_time_and_said_so():
    rows = [engine("model", "r"), engine("model", "r"), engine("model", "r")]
    for row in rows[:2]:  # sized on the cluster; the third has nothing left to generate
        row.update(cluster_s=2400.0, replicas_running=1, replica_gain=1.0)
    data = plan_data(rows, "model")
    data["cluster"] = cluster(1, 3100.0, "cluster.gpus=1") | {"unplaceable": ["e"]}
    text = render_plan(data)
    assert "  without 1 engine(s) that need more GPUs (BLOCKING below)" in text
    data["cluster"]["unplaceable"] = ["e", "f"]
    assert (
        "wall time on 1 GPU(s) (cluster.gpus=1): none: every engine needs more GPUs than that "
        "(BLOCKING below)"
    ) in render_plan(data)


def test_a_plan_without_the_weights_check_says_so():
    data = plan_data([engine("model", "r")], "model")
    data["preflight"] |= {"weights": [], "weights_checked": False}
    assert "weights: not checked (--estimate-only: nothing was asked of the Hub)" in (
        render_plan(data)
    )
    data["preflight"]["weights_checked"] = True
    assert "not checked" not in render_plan(data)


GRID = ["model=tiny", "template=own,instruct", "benchmark.limit=2"]


def finished_grid(root: Path, problem_set) -> list[str]:
    """The keys of GRID, written complete (2 samples each) as a run writes them, without Ray."""
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.execute.writer import StoreWriter
    from orchestrator.run.prepare.grid import Environment, expand_grid
    from tests.unit.orchestrator.run.plan.test_plan import generated
    from workers.benchmarks.humanevalfix.adapter import HumanEvalFix
    from workers.execspec import ExecutionBatch, ExecutionRecord, Outcome, SandboxLimits

    benchmarks = {"humanevalfix": HumanEvalFix(problem_set)}
    writer = StoreWriter(Store(str(root)), "r1", "{}", benchmarks, limits=SandboxLimits())
    keys = []
    for cell in expand_grid(load_run_config(GRID), problem_set.sha256, Environment()):
        writer.started(cell.key, cell.setting)
        writer.generated(cell.key, cell.setting, generated(cell.key, n=2))
        records = tuple(
            ExecutionRecord(f"Python/{i}", 0, Outcome.PASSED, 1.0, None, None, 0.1)
            for i in range(2)
        )
        writer.executed(cell.key, cell.setting, ExecutionBatch(records, {"python": "x"}))
        keys.append(cell.key)
    return keys


def test_plan_shows_a_setting_with_a_damaged_settings_shard_as_a_redo(
    env, capsys, tmp_path, problem_set
):
    damaged, intact = finished_grid(tmp_path, problem_set)
    shard = tmp_path / "settings" / f"{damaged}.parquet"
    shard.write_bytes(flip_data_page_bit(shard.read_bytes(), "status"))
    assert main(["plan", *GRID, f"store={tmp_path}"]) == 0
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines() if x.strip().startswith(damaged[:12])]
    assert line.split()[1] == "redo" and "generate" not in line
    assert "2/2 samples stored, rechecked by the run" in line
    assert f"(damaged: settings/{damaged}.parquet: checksum_mismatch" in line
    assert "`run` quarantines it first" in line and "reprogrid verify --fix" in line
    [other] = [x for x in out.splitlines() if x.strip().startswith(intact[:12])]
    assert "redo" not in other and "rechecked" not in other
    assert "(of these, 1 damaged: redo, below)" in out.splitlines()[0]
