"""The plan's estimate: measured throughput where the store has it, the cost model elsewhere;
sample counts from the store's generations shards."""

from __future__ import annotations

import json

import pytest

from orchestrator.analysis.cost import GPUS, REFERENCE_GPU
from orchestrator.run.config.load import load_run_config
from orchestrator.run.config.specs import EstimateSpec
from orchestrator.run.estimate.estimator import (
    measured_throughput,
    plan_json,
    resolve_devices,
    setting_work,
)
from orchestrator.run.estimate.prompttokens import TokenCounter, token_counter
from orchestrator.run.plan.samples import stored_sample_counts
from orchestrator.run.plan.state import make_plan
from orchestrator.run.preflight.checks import preflight
from orchestrator.run.preflight.hardware import GpuInventory, GpuSource
from orchestrator.run.prepare.prepared import prepare
from storage.store import Store

TINY = ["model=tiny", "benchmark.limit=4", "template=instruct", "decoding=greedy"]


def settings_row(key: str, secs: float, dtype="fp32", device="cpu", repo="m") -> dict:
    return {
        "setting_key": key,
        "status": "complete",
        "model_repo_id": repo,
        "backend": "hf",
        "dtype": dtype,
        "quant": "none",
        "device": device,
        "generation_s": secs,
        "engine_load_s": 4.0,
    }


def test_measured_throughput_from_completed_settings(tmp_path):
    store = Store(str(tmp_path))
    for key, secs in (("a", 10.0), ("b", 30.0)):
        store.write_rows("settings", key, [settings_row(key, secs)])
        store.write_rows("scores", key, [{"setting_key": key, "n_problems": 164, "n_samples": 1}])
    rates = measured_throughput(store)
    rate = rates[("m", "hf", "fp32", "none", "cpu")]
    assert rate["samples_per_s"] == 2 * 164 / 40.0 and rate["load_s"] == 4.0


def gpus(*names: str) -> GpuInventory:
    return GpuInventory(len(names), names, GpuSource.NVIDIA_SMI)


def test_resolve_devices():
    detected = resolve_devices(EstimateSpec(), gpus("NVIDIA H200"))
    assert detected.gpu == GPUS["h200"] and detected.gpu_source == "detected: NVIDIA H200"
    assumed = resolve_devices(EstimateSpec(), gpus())
    assert assumed.gpu == GPUS[REFERENCE_GPU] and assumed.gpu_source.startswith("assumed")
    unknown = resolve_devices(EstimateSpec(), gpus("NVIDIA GeForce RTX 4090"))
    assert "RTX 4090 is not in the table" in unknown.gpu_source
    chosen = resolve_devices(EstimateSpec(gpu="l40s", bandwidth_gbps=1000.0), gpus("NVIDIA H200"))
    assert chosen.gpu.name == "l40s" and chosen.gpu.bandwidth_gbps == 1000.0
    assert resolve_devices(EstimateSpec(cpu_bandwidth_gbps=7.0), gpus()).cpu.bandwidth_gbps == 7.0
    # named or detected: its memory blocks what exceeds it; assumed: a warning (estimate/fit.py)
    assert detected.gpu_named is True and chosen.gpu_named is True
    assert assumed.gpu_named is False and unknown.gpu_named is False


def test_prompt_tokens_are_exact_with_the_tokenizer_and_a_prior_without(env, tmp_path):
    prepared = prepare(load_run_config(TINY))
    plan = make_plan(Store(str(tmp_path)), prepared)
    item = plan.units[0].settings[0]
    exact = token_counter(item.setting.engine.model, 3.5)
    assert exact.source == "tokenizer"
    work = setting_work(prepared, item, exact)
    prior = setting_work(prepared, item, TokenCounter(3.5))
    assert len(work.prompt_tokens) == len(prior.prompt_tokens) == 4  # one call per problem
    assert work.prompt_tokens != prior.prompt_tokens and min(work.prompt_tokens) > 50
    prompts = [r.prompt for r in prepared.benchmark.requests(item.setting, item.key)]
    assert prior.prompt_tokens == tuple(-(-len(p) // 3.5) for p in prompts)


def test_a_fresh_store_gets_the_model_and_measurements_replace_it(env, tmp_path):
    # cluster.num_gpus=0: a local instance without GPUs on any machine (engines on CPU)
    overrides = [*TINY, "precision=fp32,bf16", "cluster.num_gpus=0", f"store={tmp_path}"]
    prepared = prepare(load_run_config(overrides))
    store = Store(str(tmp_path))
    fresh = plan_json(make_plan(store, prepared), prepared, store)
    assert fresh["estimate_basis"] == "model" and fresh["estimated_gpu_hours"] > 0
    assert all(e["basis"] == "model" for e in fresh["engines"])
    json.dumps(fresh)
    # a measured fp32 run on CPU of the same model: that engine is now measured
    repo = prepared.config.models[0].repo_id
    store.write_rows("settings", "x", [settings_row("x", 8.0, repo=repo)])
    store.write_rows("scores", "x", [{"setting_key": "x", "n_problems": 4, "n_samples": 1}])
    report = preflight(prepared)
    data = plan_json(make_plan(store, prepared), prepared, store, report)
    by_dtype = {e["dtype"]: e for e in data["engines"]}
    assert by_dtype["fp32"]["device"] == "cpu" and by_dtype["fp32"]["basis"] == "measured"
    assert by_dtype["fp32"]["estimated_s"] == pytest.approx(4.0 + 4 / (4 / 8.0))
    assert by_dtype["bf16"]["basis"] == "model"
    assert data["estimate_basis"] == "mixed"
    assert data["preflight"]["blocking"] == 0


def test_sample_counts_add_up_single_and_chunk_shards(tmp_path):
    store = Store(str(tmp_path))

    def rows(key, n):
        return [{"setting_key": key, "task_id": f"T/{i}", "sample_index": 0} for i in range(n)]

    store.write_rows("generations", "aaa", rows("aaa", 3))
    store.write_rows("generations", "bbb~0", rows("bbb", 2))
    store.write_rows("generations", "bbb~1", rows("bbb", 5))
    store.write_rows("generations", "ccc", rows("ccc", 1))
    assert stored_sample_counts(store, ["aaa", "bbb", "zzz"]) == {"aaa": 3, "bbb": 7}
