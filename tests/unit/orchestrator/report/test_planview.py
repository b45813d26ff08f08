"""`plan` as text: where each engine runs, which estimates are measured and which are the
model, the blocking problems (rendered from plan_json data), and a damaged setting as a `redo`
(through `reprogrid plan` on a store with a bit flip in a settings shard)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli import main
from orchestrator.report.planview import render_plan
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
    assert f"engine m hf bf16/none ({reason}) ~1h01m on cpu, 1.5 GPU-h [estimate (model)]" in text
    assert "GPUs here: 0 [no nvidia-smi]" in text
    assert "3/164 samples" in text


def test_measured_and_model_are_told_apart():
    both = [engine("measured", "1 of 1 GPU(s)", "h200"), engine("model", "1 of 1 GPU(s)", "h200")]
    text = render_plan(plan_data(both, "mixed"))
    assert "(measured for 1 engine(s), estimate (model) for 1)" in text
    assert "[measured]" in text and "[estimate (model)]" in text
    assert "2h03m on one device at a time, 3.0 GPU-hours" in text
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
        "on 64 GPU(s) (cluster.gpus=64): wall time 51m40s (lower bound 50m00s: the work over "
        "the GPUs or the longest unit, 50m00s), 1.2 GPU-hours on h200 (cluster.replicas=4)"
    ) in text
    assert "on the cluster 40m00s with 4 replica(s), x3.5 [estimate (model)]" in text
    data["cluster"] = cluster(None, None, "no GPUs here: set cluster.gpus=N to size a cluster")
    assert "wall time: no GPUs here: set cluster.gpus=N" in render_plan(data)


GRID = ["model=tiny", "template=own,instruct", "benchmark.limit=2"]


def finished_grid(root: Path, problem_set) -> list[str]:
    """The keys of GRID, written complete (2 samples each) as a run writes them, without Ray."""
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.execute.writer import StoreWriter
    from orchestrator.run.prepare.grid import Environment, expand_grid
    from tests.unit.orchestrator.run.plan.test_plan import generated
    from workers.benchmarks.humanevalfix.adapter import HumanEvalFix
    from workers.spec import ExecutionBatch, ExecutionRecord, Outcome, SandboxLimits

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
