"""Where one engine replica fits (orchestrator/analysis/fit.py): on how many GPUs of a kind, at
which precision, on which larger GPU, by the memory rule that caps `cluster.replicas`."""

from __future__ import annotations

from orchestrator.analysis.cost import GPUS, EngineWork, SettingWork
from orchestrator.analysis.fit import MAX_GPUS_PER_ENGINE, alternatives, fewest_gpus, weights_gb
from orchestrator.analysis.replicas import USABLE_MEMORY_FRACTION, replica_memory_gb
from workers.spec import Dtype, LengthSemantics, Quant

SETTING = SettingWork((100,), 1, 2048, LengthSemantics.TOTAL)


def work(size_b: float, dtype=Dtype.BF16, quant=Quant.NONE, num_gpus=1) -> EngineWork:
    return EngineWork(size_b, dtype, quant, False, False, num_gpus, (SETTING,))


def test_the_weights_at_each_precision():
    assert weights_gb(work(33)) == 66.0
    assert weights_gb(work(33, Dtype.FP32)) == 132.0
    assert weights_gb(work(33, Dtype.FP16, Quant.INT8)) == 33.0
    assert weights_gb(work(33, Dtype.FP16, Quant.INT4)) == 16.5


def test_the_fewest_gpus_hold_one_replica_in_their_usable_memory():
    a100 = GPUS["a100-80gb"]
    for size, dtype in ((33, Dtype.BF16), (33, Dtype.FP32), (6.7, Dtype.FP32)):
        n = fewest_gpus(work(size, dtype), a100, 2048, 1)
        need = replica_memory_gb(work(size, dtype), 2048, 1)
        assert n is not None and need <= USABLE_MEMORY_FRACTION * 80 * n
        assert n == 1 or need > USABLE_MEMORY_FRACTION * 80 * (n - 1)
    # more than a node holds is never proposed
    assert fewest_gpus(work(1000, Dtype.FP32), a100, 2048, 1) is None
    assert MAX_GPUS_PER_ENGINE == 8


def test_33b_fp32_on_one_gpu_fits_only_quantized():
    alt = alternatives(work(33, Dtype.FP32, num_gpus=2), GPUS["a100-80gb"], 1, 2048, 1)
    assert alt.gpus == 2  # its own precision needs both GPUs
    assert [(q.precision, q.gpus) for q in alt.quantized] == [("int8", 1), ("int4", 1)]
    assert alt.larger == ()  # 140 GB: not even an H200 (141 GB, 127 usable) holds it


def test_a_larger_gpu_is_proposed_smallest_first():
    alt = alternatives(work(33), GPUS["a10g"], 2, 2048, 1)
    assert alt.gpus == 4 and alt.replica_gb > 48
    assert alt.larger[0] == "a100-40gb" and set(alt.larger) >= {"a100-80gb", "h100", "h200"}
    assert "a10g" not in alt.larger


def test_a_quantized_engine_is_not_offered_a_larger_quantization():
    alt = alternatives(work(40, Dtype.FP16, Quant.INT8), GPUS["a100-40gb"], 1, 2048, 1)
    assert alt.gpus == 2 and [q.precision for q in alt.quantized] == ["int4"]
    four = alternatives(work(7, Dtype.FP16, Quant.INT4), GPUS["a10g"], 1, 2048, 1)
    assert four.quantized == ()
