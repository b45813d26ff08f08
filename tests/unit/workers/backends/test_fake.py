"""The fake backend's knobs for simulated runs: per-precision delays, a load delay and a
deterministic jitter whose mean is the delay (perf/cluster_sim.py relies on that mean)."""

from __future__ import annotations

import statistics
import time

import pytest

from workers.backends.fake import FakeBackend
from workers.spec import (
    Dtype,
    EngineSpec,
    GenRequest,
    LengthSemantics,
    ModelSpec,
    Quant,
    SamplingSpec,
    Tuning,
)


def engine(repo_id: str, dtype=Dtype.BF16, quant=Quant.NONE, name: str = "sim") -> EngineSpec:
    model = ModelSpec(name, repo_id, "r", "sim", 7.0, Tuning.INSTRUCT, "yi")
    return EngineSpec(model, "fake", dtype, quant)


def request(prompt: str) -> GenRequest:
    greedy = SamplingSpec(False, 1.0, 1.0, 0, None)
    return GenRequest("T/0", prompt, 1, 1, greedy, 512, LengthSemantics.TOTAL, ())


KNOBS = "fake://delay=9,delay-bf16=0.01,delay-int8=0.04,load=0.05"


@pytest.mark.parametrize(
    ("dtype", "quant", "delay"),
    [(Dtype.BF16, Quant.NONE, 0.01), (Dtype.FP16, Quant.INT8, 0.04), (Dtype.FP32, Quant.NONE, 9)],
)
def test_the_delay_of_the_engines_precision(dtype, quant, delay):
    backend = FakeBackend()
    backend.load(engine(KNOBS, dtype, quant))
    assert backend.delay == delay


def test_load_sleeps_and_jitter_keeps_the_mean():
    backend = FakeBackend()
    started = time.perf_counter()
    backend.load(engine("fake://delay=0.001,load=0.05,jitter=0.5"))
    assert time.perf_counter() - started >= 0.05
    delays = [backend._request_delay(request(f"prompt {i}")) for i in range(2000)]
    assert min(delays) >= 0.0005 and max(delays) <= 0.0015
    assert statistics.mean(delays) == pytest.approx(0.001, rel=0.03)
    assert delays[:5] == [backend._request_delay(request(f"prompt {i}")) for i in range(5)]
    # another model draws its own factors for the same prompts (and they keep the mean)
    other = FakeBackend()
    other.load(engine("fake://delay=0.001,load=0,jitter=0.5", name="other"))
    theirs = [other._request_delay(request(f"prompt {i}")) for i in range(2000)]
    assert sum(a != b for a, b in zip(theirs, delays, strict=True)) > 1990
    assert statistics.mean(theirs) == pytest.approx(0.001, rel=0.03)


def test_the_engine_options_say_when_the_process_and_the_load_started():
    before = time.time()
    info = FakeBackend().load(engine("fake://delay=0"))
    process = float(info.options["process_started_at"])
    assert process <= before + 1 and before - 3600 * 24 * 365 < process
    # written to the millisecond, rounded: up to half a millisecond either side of the clock
    assert before - 0.0005 <= float(info.options["load_started_at"]) <= time.time() + 0.0005
