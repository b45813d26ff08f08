"""Run-time arithmetic: the cost model of a setting that has not run yet, throughput measured
from finished settings, and durations as text. Pure: no I/O, no clock, no environment.

The cost model (docs/cost.md has the derivation and every source): single-stream decoding reads
every weight once per generated token, so a decode step takes the weights' bytes over the
device's memory bandwidth, times the slow-down of the way reprogrid decodes (one prompt per
`generate` call in eager PyTorch) and of bitsandbytes' kernels, plus a fixed per-step cost of
the harness's generation loop. A generate call is one prefill (compute-bound) and one step per
output token; output tokens are a stated prior capped by what the length limit leaves after the
prompt.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workers.spec import Dtype, LengthSemantics, Quant


def format_duration(seconds: float) -> str:
    """Whole seconds as "2d03h", "1h02m", "3m05s" or "42s" (negative values count as 0)."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


# -- measured throughput -----------------------------------------------------------------------

# (model repo id, backend, dtype, quant, device class "gpu" | "cpu")
EngineKind = tuple[str, str, str, str, str]


def device_class(device: str | None) -> str:
    """ "gpu" for a device a settings row recorded as CUDA ("cuda:NVIDIA H200"), else "cpu"."""
    return "gpu" if str(device or "").startswith("cuda") else "cpu"


def throughput(
    settings: Iterable[Mapping[str, Any]], scores: Mapping[str, Mapping[str, Any]]
) -> dict[EngineKind, dict[str, float]]:
    """Samples/s and mean engine load time per (model repo id, backend, dtype, quant, device
    class), from complete settings rows that recorded their generation time, with their scores
    rows (for the sample count). Per precision because 8-bit decodes several times slower than
    fp16 on the same model (see CostParams), per device class because a CPU run says nothing
    about a GPU."""
    acc: dict[EngineKind, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in settings:
        if row["status"] != "complete" or not row.get("generation_s"):
            continue
        score = scores.get(row["setting_key"])
        if score is None:
            continue
        kind = (
            str(row["model_repo_id"]),
            str(row["backend"]),
            str(row.get("dtype")),
            str(row.get("quant")),
            device_class(row.get("device")),
        )
        a = acc[kind]
        a["samples"] += score["n_problems"] * score["n_samples"]
        a["seconds"] += row["generation_s"]
        a["load_s"] += row.get("engine_load_s") or 0.0
        a["n"] += 1
    return {
        k: {"samples_per_s": v["samples"] / v["seconds"], "load_s": v["load_s"] / v["n"]}
        for k, v in acc.items()
        if v["seconds"] > 0
    }


# -- devices -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceSpec:
    """What the cost model needs of a device."""

    name: str  # a GPUS key, or "cpu"
    bandwidth_gbps: float  # peak memory bandwidth, GB/s (1e9 bytes/s)
    tflops_16: float  # dense fp16/bf16 matrix throughput, TFLOP/s (tensor cores on a GPU)
    tflops_32: float  # dense fp32 throughput, TFLOP/s (PyTorch's default matmul: no TF32)
    memory_gb: float | None  # memory of one device; None: not checked (CPU)
    is_gpu: bool = True


# NVIDIA's datasheets (dense figures, i.e. without the 2x "with sparsity"): A100 (SXM4 40 GB and
# 80 GB), "NVIDIA A100 Tensor Core GPU" datasheet; H100 SXM5 and H200 SXM, the H100 and H200
# datasheets; L40S, the L40S datasheet; A10G (AWS g5), the A10 datasheet's figures (AWS
# publishes 24 GB and no other number for its A10G variant).
GPUS: dict[str, DeviceSpec] = {
    "a100-40gb": DeviceSpec("a100-40gb", 1555.0, 312.0, 19.5, 40.0),
    "a100-80gb": DeviceSpec("a100-80gb", 2039.0, 312.0, 19.5, 80.0),
    "h100": DeviceSpec("h100", 3350.0, 989.0, 67.0, 80.0),
    "h200": DeviceSpec("h200", 4800.0, 989.0, 67.0, 141.0),
    "l40s": DeviceSpec("l40s", 864.0, 362.0, 91.6, 48.0),
    "a10g": DeviceSpec("a10g", 600.0, 125.0, 31.2, 24.0),
}
REFERENCE_GPU = "a100-80gb"  # what `estimate.gpu=auto` assumes when no GPU can be named

# Substrings of `nvidia-smi -L` names, most specific first.
_GPU_NAME_HINTS = (
    ("a100", "40gb", "a100-40gb"),
    ("a100", "80gb", "a100-80gb"),
    ("a100", "", "a100-80gb"),
    ("h200", "", "h200"),
    ("h100", "", "h100"),
    ("l40s", "", "l40s"),
    ("a10g", "", "a10g"),
)


def gpu_kind(device_name: str) -> str | None:
    """The GPUS key of a GPU as `nvidia-smi -L` names it ("NVIDIA A100-SXM4-80GB"), or None."""
    name = device_name.lower().replace(" ", "")
    for family, memory, key in _GPU_NAME_HINTS:
        if family in name and memory in name:
            return key
    return None


# -- the model's constants ---------------------------------------------------------------------


@dataclass(frozen=True)
class CostParams:
    """The cost model's constants; the first three come from config (`estimate.*`)."""

    output_tokens: int = 200  # prior: output tokens per sample (docs/cost.md)
    # One prompt per call in eager PyTorch reaches 1/5.6 of the bandwidth bound: LLaMA-7B fp16,
    # batch 1, A100-80GB: 25.5 tok/s against 2e12 B/s / (7e9 x 2 B) = 143 tok/s (PyTorch blog,
    # "Accelerating Generative AI with PyTorch II: GPT, Fast", 2023-11-30, "Starting Point").
    # The loop is CPU-overhead bound on a GPU; a CPU engine waits for its own kernels, so there
    # the factor is 1 (checked against SmolLM2 on CPU in docs/cost.md).
    call_factor_gpu: float = 5.6
    call_factor_cpu: float = 1.0
    # bitsandbytes against fp16 of the same model, transformers, batch 1: LLM.int8 4.7x
    # (LLaMA-7B, RTX 3090: 32.89 -> 154.55 ms/token, bitsandbytes issue #347; "about 5x" on an
    # A100 40GB, issue #490); 4-bit 1.33x (Mistral-7B NF4 36.5 vs fp16 48.6 tok/s, issue #611;
    # the fp4 the harness uses runs the same 4-bit kernels).
    int8_slowdown: float = 4.7
    int4_slowdown: float = 1.33
    # Per-step cost of the harness's loop that no weight read explains (stopping criterion,
    # sampling, launches), measured on the 2-layer tiny model: 6.0 ms on an H200 (README, "CUDA
    # paths": 1026 tokens + 32 prefills in 6.34 s), 1.9 ms on this project's CPU (README,
    # "vLLM vs transformers": 16259 tokens + 60 prefills in 30.7 s).
    step_floor_gpu_s: float = 0.0060
    step_floor_cpu_s: float = 0.0019
    # Engine load: a fixed part (imports, CUDA context; README: 3.1-3.7 s for the CPU models)
    # plus the checkpoint (16-bit on the Hub) read at an assumed 1 GB/s.
    load_fixed_s: float = 5.0
    load_gbps: float = 1.0
    vllm_max_seqs: int = 256  # vLLM's default max_num_seqs: sequences decoded together


def bytes_per_weight(dtype: Dtype, quant: Quant) -> float:
    """Bytes one parameter occupies: 4 (fp32), 2 (fp16/bf16), 1 (LLM.int8), 0.5 (4-bit)."""
    if quant is Quant.INT8:
        return 1.0
    if quant is Quant.INT4:
        return 0.5
    return 4.0 if dtype is Dtype.FP32 else 2.0


def quant_factor(quant: Quant, params: CostParams) -> float:
    """Slow-down of a quantized step against the bandwidth bound of its own (smaller) weights:
    the slow-down against fp16 times fp16's bytes over the quantized bytes."""
    if quant is Quant.INT8:
        return params.int8_slowdown * 2.0 / 1.0
    if quant is Quant.INT4:
        return params.int4_slowdown * 2.0 / 0.5
    return 1.0


def output_tokens(
    n_prompt_tokens: int, max_length: int, semantics: LengthSemantics, prior: int
) -> int:
    """Tokens a call is expected to generate: the prior, capped by the limit. Under `total` the
    limit counts the prompt, and a prompt at or over it is not generated from (0)."""
    if semantics is LengthSemantics.TOTAL:
        return max(0, min(prior, max_length - n_prompt_tokens))
    return min(prior, max_length)


# -- the estimate ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SettingWork:
    """One setting's generation work as the cost model sees it."""

    prompt_tokens: tuple[int, ...]  # one entry per generate call (a prompt called k times: k)
    sequences_per_call: int  # samples one call returns (the harness's --batch_size)
    max_length: int
    length_semantics: LengthSemantics


@dataclass(frozen=True)
class EngineWork:
    """One engine load and the settings it generates."""

    size_b: float  # parameters, billions
    dtype: Dtype
    quant: Quant
    # What the engine's backend is, as its definition says (workers/backends/base.py):
    batched: bool  # continuous batching: decode steps shared by every sequence in flight
    model_free: bool  # no model runs (replayed or fake text): nothing to estimate
    num_gpus: int
    settings: tuple[SettingWork, ...]
    # Calls decoding together (batched transformers, `generation.batch_size`; the definition's
    # `prompts_per_call`): 1 for one prompt per call.
    prompts_per_call: int = 1


@dataclass(frozen=True)
class EngineCost:
    """The model's estimate for one engine unit on one device."""

    device: str  # the DeviceSpec name
    load_s: float
    generate_s: float
    step_s: float  # seconds per decode step (one token of one call)
    calls: int  # generate calls that produce tokens
    output_tokens: int  # tokens expected over all calls and sequences
    weights_gb: float  # weights at the engine's precision, GB (1e9 bytes)
    fits: bool | None  # the weights fit the device memory x num_gpus; None: not checked

    @property
    def total_s(self) -> float:
        return self.load_s + self.generate_s


def step_seconds(work: EngineWork, device: DeviceSpec, params: CostParams) -> float:
    """One decode step of one call: weight bytes over bandwidth, times the call and quant
    slow-downs, plus the loop's floor. vLLM's compiled loop is taken at the bandwidth bound."""
    if work.model_free:
        return 0.0
    weights = work.size_b * 1e9 * bytes_per_weight(work.dtype, work.quant)
    if work.batched:
        call = 1.0
    else:
        call = params.call_factor_gpu if device.is_gpu else params.call_factor_cpu
    floor = params.step_floor_gpu_s if device.is_gpu else params.step_floor_cpu_s
    read_s = weights / (device.bandwidth_gbps * 1e9)
    return call * quant_factor(work.quant, params) * read_s + floor


def _peak_flops(work: EngineWork, device: DeviceSpec) -> float:
    fp32 = work.dtype is Dtype.FP32 and work.quant is Quant.NONE
    return (device.tflops_32 if fp32 else device.tflops_16) * 1e12


def _calls(work: EngineWork, prior: int) -> list[tuple[int, int, int]]:
    """(prompt tokens, output tokens, sequences) of every call that generates."""
    out = []
    for s in work.settings:
        for n_prompt in s.prompt_tokens:
            n_out = output_tokens(n_prompt, s.max_length, s.length_semantics, prior)
            if n_out > 0:
                out.append((n_prompt, n_out, s.sequences_per_call))
    return out


def estimate_engine(work: EngineWork, device: DeviceSpec, params: CostParams) -> EngineCost:
    """Load plus generation time of an engine unit on `device` (see the module docstring)."""
    weights_gb = work.size_b * bytes_per_weight(work.dtype, work.quant)
    fits = None
    if device.memory_gb is not None and not work.model_free:
        fits = weights_gb <= device.memory_gb * max(1, work.num_gpus)
    calls = _calls(work, params.output_tokens)
    step = step_seconds(work, device, params)
    tokens = sum(n_out * seqs for _, n_out, seqs in calls)
    if work.model_free:
        return EngineCost(device.name, 0.0, 0.0, 0.0, len(calls), tokens, weights_gb, fits)
    flop_per_token = 2.0 * work.size_b * 1e9  # a forward pass: 2 FLOPs per parameter per token
    peak = _peak_flops(work, device)
    prefill = sum(n_prompt * seqs for n_prompt, _, seqs in calls) * flop_per_token / peak
    if work.batched:
        generate = prefill + _vllm_decode_s(calls, step, flop_per_token / peak, params)
    elif work.prompts_per_call > 1:
        generate = prefill + batched_decode_s(
            calls, work.prompts_per_call, step, flop_per_token / peak
        )
    else:
        generate = prefill + sum(n_out * step for _, n_out, _ in calls)
    load = params.load_fixed_s + work.size_b * 2.0 / params.load_gbps
    return EngineCost(device.name, load, generate, step, len(calls), tokens, weights_gb, fits)


def _vllm_decode_s(
    calls: Sequence[tuple[int, int, int]],
    step_s: float,
    compute_s_per_token: float,
    params: CostParams,
) -> float:
    """vLLM decodes up to `vllm_max_seqs` sequences per step: a step costs the weight read
    (step_s) or the batch's compute, whichever is larger."""
    sequences = sum(seqs for _, _, seqs in calls)
    if not sequences:
        return 0.0
    batch = min(sequences, params.vllm_max_seqs)
    tokens = sum(n_out * seqs for _, n_out, seqs in calls)
    per_step = max(step_s, batch * compute_s_per_token)
    return math.ceil(tokens / batch) * per_step


def batched_decode_s(
    calls: Sequence[tuple[int, int, int]],
    batch_size: int,
    step_s: float,
    compute_s_per_token: float,
) -> float:
    """Decode time of batched transformers generation (`generation.batch_size` = B,
    workers/backends/hf/batched.py): up to B calls decode together and a finished call's place
    is taken at once by the next, so a step decodes the sequences of B calls (fewer only when
    fewer are left). A step reads the weights once and pays eager PyTorch's per-step overhead
    once, as one call's step does (`step_s`, bitsandbytes' slow-down included), unless the
    rows' compute takes longer. `calls`: (prompt tokens, output tokens, sequences) each."""
    sequences = sum(seqs for _, _, seqs in calls)
    if not sequences:
        return 0.0
    rows = min(sequences, batch_size * max(seqs for _, _, seqs in calls))
    tokens = sum(n_out * seqs for _, n_out, seqs in calls)
    per_step = max(step_s, rows * compute_s_per_token)
    return math.ceil(tokens / rows) * per_step


def vllm_bnb4_step_s(size_b: float, device: DeviceSpec, params: CostParams) -> float:
    """One decode step of vLLM with in-flight bitsandbytes 4-bit (`quantization=
    "bitsandbytes"`, nf4): vLLM's compiled loop at the bandwidth bound of the 4-bit weights,
    times bitsandbytes' 4-bit slow-down (vLLM's bitsandbytes method calls the same kernels as
    transformers), plus the loop's floor. Where the installed vLLM has no bitsandbytes (vLLM
    0.32), `backend=auto` places these settings on batched transformers instead."""
    work = EngineWork(size_b, Dtype.FP16, Quant.INT4, True, False, 1, ())
    return step_seconds(work, device, params)


def gpu_hours(cost: EngineCost, device: DeviceSpec, num_gpus: int) -> float:
    """GPU-hours an engine holds: its run time x the GPUs it reserves (0 on a CPU)."""
    return cost.total_s * num_gpus / 3600.0 if device.is_gpu else 0.0
