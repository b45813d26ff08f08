"""Run-time arithmetic: durations as text, measured throughput, and the cost model against the
figures it is built from (docs/cost.md)."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator.analysis.cost import (
    GPUS,
    CostParams,
    DeviceSpec,
    EngineWork,
    SettingWork,
    batched_decode_s,
    bytes_per_weight,
    device_class,
    estimate_engine,
    format_duration,
    gpu_hours,
    gpu_kind,
    output_tokens,
    step_seconds,
    throughput,
    vllm_bnb4_step_s,
)
from workers.spec import Dtype, LengthSemantics, Quant

TOTAL = LengthSemantics.TOTAL
NO_FLOOR = CostParams(step_floor_gpu_s=0.0, step_floor_cpu_s=0.0)


def test_format_duration():
    assert [format_duration(s) for s in (5, 65, 3700, 90_000)] == ["5s", "1m05s", "1h01m", "1d01h"]


@pytest.mark.parametrize(
    ("dtype", "quant", "expected"),
    [
        (Dtype.FP32, Quant.NONE, 4.0),
        (Dtype.BF16, Quant.NONE, 2.0),
        (Dtype.FP16, Quant.NONE, 2.0),
        (Dtype.FP16, Quant.INT8, 1.0),
        (Dtype.FP16, Quant.INT4, 0.5),
    ],
)
def test_bytes_per_weight(dtype, quant, expected):
    assert bytes_per_weight(dtype, quant) == expected


@pytest.mark.parametrize(
    ("n_prompt", "max_length", "semantics", "expected"),
    [
        (100, 2048, TOTAL, 200),  # the prior
        (400, 512, TOTAL, 112),  # what the limit leaves after the prompt
        (512, 512, TOTAL, 0),  # prompt at the limit: not generated from
        (900, 512, TOTAL, 0),
        (900, 512, LengthSemantics.NEW_TOKENS, 200),  # the limit counts output only
        (10, 64, LengthSemantics.NEW_TOKENS, 64),
    ],
)
def test_output_tokens_is_the_prior_capped_by_the_limit(n_prompt, max_length, semantics, expected):
    assert output_tokens(n_prompt, max_length, semantics, prior=200) == expected


def work(
    quant=Quant.NONE, dtype=Dtype.FP16, batched=False, model_free=False, size_b=7.0, prompts=(10,)
):
    setting = SettingWork(tuple(prompts), 1, 2048, TOTAL)
    return EngineWork(size_b, dtype, quant, batched, model_free, 1, (setting,))


def test_the_call_factor_reproduces_its_source():
    # LLaMA-7B fp16, batch 1, eager PyTorch, A100-80GB at 2 TB/s: 25.5 tok/s (PyTorch blog).
    a100_2tbs = DeviceSpec("a100", 2000.0, 312.0, 19.5, 80.0)
    tokens_per_s = 1.0 / step_seconds(work(), a100_2tbs, NO_FLOOR)
    assert tokens_per_s == pytest.approx(25.5, rel=0.01)


@pytest.mark.parametrize(("quant", "slowdown"), [(Quant.INT8, 4.7), (Quant.INT4, 1.33)])
def test_bitsandbytes_steps_are_their_sources_slowdown_of_fp16(quant, slowdown):
    gpu = GPUS["h100"]
    fp16 = step_seconds(work(), gpu, NO_FLOOR)
    assert step_seconds(work(quant), gpu, NO_FLOOR) == pytest.approx(slowdown * fp16)


def test_step_time_scales_with_weights_over_bandwidth_plus_the_floor():
    params = CostParams()
    slow, fast = GPUS["a10g"], GPUS["h200"]
    floor = params.step_floor_gpu_s
    ratio = (step_seconds(work(), slow, params) - floor) / (
        step_seconds(work(), fast, params) - floor
    )
    assert ratio == pytest.approx(fast.bandwidth_gbps / slow.bandwidth_gbps)
    fp32 = step_seconds(work(dtype=Dtype.FP32), fast, params) - floor
    assert fp32 == pytest.approx(2 * (step_seconds(work(), fast, params) - floor))


def test_engine_estimate_adds_prefill_decode_and_load():
    params = CostParams(output_tokens=100)
    gpu = GPUS["a100-80gb"]
    w = work(prompts=(50, 50, 3000))  # the last prompt is over the 2048 limit: no tokens
    cost = estimate_engine(w, gpu, params)
    step = step_seconds(w, gpu, params)
    prefill = 2 * 7e9 * 100 / (gpu.tflops_16 * 1e12)
    assert cost.calls == 2 and cost.output_tokens == 200
    assert cost.generate_s == pytest.approx(200 * step + prefill)
    assert cost.load_s == pytest.approx(params.load_fixed_s + 7.0 * 2 / params.load_gbps)
    assert cost.weights_gb == pytest.approx(14.0) and cost.fits is True
    assert gpu_hours(cost, gpu, num_gpus=2) == pytest.approx(cost.total_s * 2 / 3600)


def test_weights_that_do_not_fit_are_flagged_and_cpu_costs_no_gpu_hours():
    big = work(dtype=Dtype.FP32, size_b=13.0)  # 52 GB
    assert estimate_engine(big, GPUS["a100-40gb"], CostParams()).fits is False
    assert estimate_engine(big, GPUS["a100-80gb"], CostParams()).fits is True
    cpu = DeviceSpec("cpu", 20.0, 0.09, 0.09, None, is_gpu=False)
    cost = estimate_engine(big, cpu, CostParams())
    assert cost.fits is None and gpu_hours(cost, cpu, 1) == 0.0


def test_vllm_decodes_sequences_together():
    gpu = GPUS["h100"]
    prompts = tuple([100] * 64)
    hf = estimate_engine(work(prompts=prompts), gpu, CostParams())
    vllm = estimate_engine(work(prompts=prompts, batched=True), gpu, CostParams())
    assert vllm.generate_s < hf.generate_s / 10


def test_model_free_backends_cost_nothing():
    free = work(model_free=True)
    assert estimate_engine(free, GPUS["h100"], CostParams()).total_s == 0.0


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_gpu_kind_from_nvidia_smi_names(name, kind):
    assert gpu_kind(name) == kind


def test_throughput_is_per_engine_precision_and_device_class():
    def row(key, quant, device, secs):
        return {
            "setting_key": key,
            "status": "complete",
            "model_repo_id": "m",
            "backend": "hf",
            "dtype": "fp16",
            "quant": quant,
            "device": device,
            "generation_s": secs,
            "engine_load_s": 2.0,
        }

    settings = [
        row("a", "none", "cuda:NVIDIA H200", 10.0),
        row("b", "int8", "cuda:NVIDIA H200", 40.0),
        row("c", "none", "cpu", 100.0),
        {**row("d", "none", "cpu", 1.0), "status": "failed"},
    ]
    scores = {k: {"n_problems": 20, "n_samples": 1} for k in "abcd"}
    rates = throughput(settings, scores)
    assert set(rates) == {
        ("m", "hf", "fp16", "none", "gpu"),
        ("m", "hf", "fp16", "int8", "gpu"),
        ("m", "hf", "fp16", "none", "cpu"),
    }
    assert rates[("m", "hf", "fp16", "int8", "gpu")]["samples_per_s"] == 0.5
    assert device_class("cuda:0") == "gpu" and device_class(None) == "cpu"


# -- batched transformers and vLLM's bitsandbytes 4-bit ------------------------------------------


def test_batched_transformers_decode_b_calls_per_step_until_compute_bound():
    calls = [(100, 200, 1)] * 64  # 64 calls of 200 output tokens, one sequence each
    step = 0.05
    assert batched_decode_s(calls, 8, step, 0.0) == pytest.approx(64 * 200 / 8 * step)
    assert batched_decode_s(calls, 1, step, 0.0) == pytest.approx(64 * 200 * step)
    # the rows' compute bounds a step once it outweighs the weight read
    assert batched_decode_s(calls, 64, step, 0.01) == pytest.approx(200 * 64 * 0.01)
    assert batched_decode_s(calls[:3], 8, step, 0.0) == pytest.approx(200 * step)  # 3 left
    assert batched_decode_s([], 8, step, 0.0) == 0.0


def test_the_engine_estimate_batches_transformers_by_its_prompts_per_call():
    gpu = GPUS["h200"]
    one = work(quant=Quant.INT8, prompts=(300,) * 160)
    eight = dataclasses.replace(one, prompts_per_call=8)
    a, b = estimate_engine(one, gpu, CostParams()), estimate_engine(eight, gpu, CostParams())
    assert a.step_s == b.step_s and a.output_tokens == b.output_tokens
    prefill = b.generate_s - b.output_tokens / 8 * b.step_s  # one call's prefill each, both
    assert a.generate_s - prefill == pytest.approx(a.output_tokens * a.step_s, rel=1e-6)
    assert a.generate_s / b.generate_s > 7


def test_vllm_bitsandbytes_4bit_step_is_the_bnb_slowdown_at_vllms_bound():
    gpu = GPUS["h100"]
    step = vllm_bnb4_step_s(7.0, gpu, NO_FLOOR)
    fp16_vllm = step_seconds(work(batched=True), gpu, NO_FLOOR)
    assert step / fp16_vllm == pytest.approx(1.33)  # int4_slowdown over fp16, no eager factor
    assert step < step_seconds(work(quant=Quant.INT4), gpu, NO_FLOOR)  # transformers batch 1
