"""What `cluster.replicas` buys a one-prompt-per-call engine, and where memory and bandwidth cap
it. Pure: no I/O. docs/cost.md ("Replicas and the cluster") has the derivation and sources.

R replicas are R processes on one GPU, each decoding its own stream at batch 1. A decode step
of one stream keeps the GPU busy only while it reads the weights (at the kernels' efficiency:
`k_quant x W / BW`); the rest of the step (`t_step` of cost.py) is the host's Python loop and
kernel launches, when the GPU idles (the PyTorch blog's "heavily CPU overhead bound" loop).
Other processes' kernels fill those gaps; the GPU runs one context's kernels at a time without
MPS and overlaps them with it (NVIDIA's MPS guide), and in both cases the weight reads share one
memory bandwidth. So k streams on one GPU decode at an aggregate `min(k, t_step / busy)` times
one stream's rate: the cap is the share of a step the GPU idles, about `k_call` (5.6) for a
large model and more where the loop's fixed floor dominates a small one.

Memory caps R first for large models: every replica holds its own weights, the KV cache of its
sequences at the length limit and a CUDA context (docs/cluster.md's table); 90% of the GPU is
taken as usable.

How a unit's settings spread over its replicas (a setting on the harness's random stream one
chunk at a time, on any replica) is analysis/schedule.py's replay, with `ReplicaSizing.cap`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.analysis.cost import (
    CostParams,
    DeviceSpec,
    EngineWork,
    bytes_per_weight,
    quant_factor,
    step_seconds,
)
from workers.spec import Dtype, Quant

USABLE_MEMORY_FRACTION = 0.9  # of a GPU's memory (docs/cluster.md, "How many fit")
REPLICA_CONTEXT_GB = 2.0  # CUDA context, activations and allocator slack per replica
# KV per token from the parameter count, for the LLaMA shape (hidden size 128 x layers, 12 x
# layers x hidden^2 parameters): LLaMA-7B and CodeLlama-13B exactly (4096 x 32, 5120 x 40).
# Models with grouped or single KV heads (CodeGemma 2B) hold less: an upper bound there.
HEAD_DIM_LAYERS = 128.0
PARAMS_PER_LAYER_HIDDEN2 = 12.0


def kv_bytes_per_token(size_b: float, dtype: Dtype, quant: Quant) -> float:
    """Bytes of K and V one token adds to the cache (fp32 caches in fp32, the rest in 16
    bits: bitsandbytes computes in fp16)."""
    hidden = (HEAD_DIM_LAYERS * size_b * 1e9 / PARAMS_PER_LAYER_HIDDEN2) ** (1.0 / 3.0)
    layers = hidden / HEAD_DIM_LAYERS
    width = 4.0 if dtype is Dtype.FP32 and quant is Quant.NONE else 2.0
    return 2.0 * layers * hidden * width


def replica_memory_gb(work: EngineWork, max_length: int, sequences: int) -> float:
    """One replica: its weights, the KV cache of `sequences` at `max_length`, its context."""
    weights = work.size_b * bytes_per_weight(work.dtype, work.quant)
    kv = kv_bytes_per_token(work.size_b, work.dtype, work.quant) * max_length * sequences
    return weights + kv / 1e9 + REPLICA_CONTEXT_GB


def replicas_that_fit(per_replica_gb: float, device: DeviceSpec, num_gpus: int) -> int | None:
    """How many replicas fit the GPU memory of the unit (None: the device has no figure)."""
    if device.memory_gb is None:
        return None
    usable = USABLE_MEMORY_FRACTION * device.memory_gb * max(1, num_gpus)
    return math.floor(usable / per_replica_gb)


def busy_seconds(work: EngineWork, device: DeviceSpec, params: CostParams) -> float:
    """The part of one decode step the GPU is busy: the weight read at the kernels' efficiency
    (bitsandbytes' slow-down included); cost.step_seconds adds the host's share to it."""
    weights = work.size_b * 1e9 * bytes_per_weight(work.dtype, work.quant)
    return quant_factor(work.quant, params) * weights / (device.bandwidth_gbps * 1e9)


@dataclass(frozen=True)
class ReplicaSizing:
    """What `cluster.replicas` gives one unit on one device."""

    requested: int  # cluster.replicas as the dispatcher applies it (1 for multi-GPU models)
    fit: int | None  # replicas that fit the unit's GPU memory (None: not checked)
    cap: float  # the aggregate speed-up bound t_step / busy (inf: nothing to read)
    per_replica_gb: float
    batched: bool  # the backend batches a unit's settings itself (vLLM): replicas add nothing

    @property
    def running(self) -> int:
        """The replicas the estimate counts: those that fit (at least one)."""
        if self.fit is None:
            return self.requested
        return max(1, min(self.requested, self.fit))

    @property
    def gain(self) -> float:
        """Aggregate decode rate of `running` replicas over one replica's."""
        return 1.0 if self.batched else min(float(self.running), self.cap)


def size_replicas(
    work: EngineWork,
    device: DeviceSpec,
    params: CostParams,
    requested: int,
    *,
    batched: bool,
    max_length: int,
    sequences: int,
) -> ReplicaSizing:
    per_replica = replica_memory_gb(work, max_length, sequences)
    step = step_seconds(work, device, params)
    busy = busy_seconds(work, device, params)
    cap = step / busy if busy > 0 and step > 0 else math.inf
    fit = replicas_that_fit(per_replica, device, work.num_gpus)
    return ReplicaSizing(requested, fit, max(1.0, cap), per_replica, batched)
