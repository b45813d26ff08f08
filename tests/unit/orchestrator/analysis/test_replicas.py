"""What replicas buy a batch-1 engine and where memory and bandwidth cap it, against the
figures they come from: docs/cluster.md's table, docs/cost.md's k_call
(orchestrator/analysis/replicas.py)."""

from __future__ import annotations

import math

import pytest

from orchestrator.analysis.cost import GPUS, CostParams, EngineWork, SettingWork, step_seconds
from orchestrator.analysis.replicas import (
    ReplicaSizing,
    busy_seconds,
    kv_bytes_per_token,
    replica_memory_gb,
    replicas_that_fit,
    size_replicas,
)
from workers.spec import Dtype, LengthSemantics, Quant

SETTING = SettingWork((100,), 1, 2048, LengthSemantics.TOTAL)


def work(size_b: float, dtype=Dtype.BF16, quant=Quant.NONE, num_gpus=1) -> EngineWork:
    return EngineWork(size_b, dtype, quant, False, False, num_gpus, (SETTING,))


@pytest.mark.parametrize(
    ("size_b", "dtype", "exact"),
    [
        (6.7, Dtype.BF16, 2 * 32 * 4096 * 2),  # LLaMA-7B shape
        (13.0, Dtype.FP32, 2 * 40 * 5120 * 4),  # CodeLlama-13B in fp32
        (1.35, Dtype.FP16, 2 * 24 * 2048 * 2),  # DeepSeekCoder 1.3B (deeper than the rule)
    ],
)
def test_kv_per_token_follows_the_llama_shape(size_b, dtype, exact):
    assert kv_bytes_per_token(size_b, dtype, Quant.NONE) == pytest.approx(exact, rel=0.06)


@pytest.mark.parametrize(
    ("size_b", "dtype", "quant", "h100", "h200"),
    [  # docs/cluster.md, "How many fit"
        (1.35, Dtype.FP32, Quant.NONE, 8, 15),
        (6.7, Dtype.FP32, Quant.NONE, 2, 4),
        (6.7, Dtype.BF16, Quant.NONE, 4, 7),
        (6.7, Dtype.FP16, Quant.INT8, 7, 12),
        (13.0, Dtype.FP32, Quant.NONE, 1, 2),
        (13.0, Dtype.BF16, Quant.NONE, 2, 4),
    ],
)
def test_replicas_that_fit_match_the_cluster_table(size_b, dtype, quant, h100, h200):
    per_replica = replica_memory_gb(work(size_b, dtype, quant), 2048, 1)
    assert replicas_that_fit(per_replica, GPUS["h100"], 1) == h100
    assert replicas_that_fit(per_replica, GPUS["h200"], 1) == h200


def test_the_bandwidth_cap_is_k_call_plus_the_loops_floor():
    w, gpu = work(6.7), GPUS["h200"]
    no_floor = CostParams(step_floor_gpu_s=0.0)
    # without the floor, a step is k_call x the weight read: R streams gain at most k_call
    assert step_seconds(w, gpu, no_floor) / busy_seconds(w, gpu, no_floor) == pytest.approx(5.6)
    sizing = size_replicas(w, gpu, CostParams(), 16, batched=False, max_length=2048, sequences=1)
    read = 6.7e9 * 2 / 4.8e12
    assert sizing.cap == pytest.approx((5.6 * read + 0.006) / read)  # 7.75
    assert sizing.fit == 7 and sizing.running == 7 and sizing.gain == 7.0
    # 8-bit: bitsandbytes' kernels keep the GPU busier, so replicas buy less
    int8 = size_replicas(
        work(6.7, Dtype.FP16, Quant.INT8),
        gpu,
        CostParams(),
        12,
        batched=False,
        max_length=2048,
        sequences=1,
    )
    assert int8.gain == pytest.approx(int8.cap) and int8.cap < sizing.cap


def test_a_batched_engine_gains_nothing_and_memory_caps_the_running_replicas():
    assert ReplicaSizing(4, None, math.inf, 1.0, True).gain == 1.0
    capped = ReplicaSizing(8, 3, math.inf, 20.0, False)
    assert capped.running == 3 and capped.gain == 3.0
    none_fit = ReplicaSizing(4, 0, math.inf, 200.0, False)
    assert none_fit.running == 1
