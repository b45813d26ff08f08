from __future__ import annotations

import dataclasses

from workers.benchmarks.sampling import problem_requests
from workers.keys import sample_seed
from workers.spec import (
    BenchmarkSpec,
    DecodingSpec,
    Dtype,
    EngineSpec,
    ModelSpec,
    Quant,
    SeedPolicy,
    SettingSpec,
    StopRule,
    Tuning,
)

MODEL = ModelSpec("m", "org/m", "rev", "fam", 1.0, Tuning.BASE, "instruct")
BASE = SettingSpec(
    EngineSpec(MODEL, "hf", Dtype.FP32, Quant.NONE),
    BenchmarkSpec("humanevalfix", "tests", "h"),
    "instruct",
    DecodingSpec("t0.8", True, 0.8, 0.95, 0),
    512,
    n_samples=3,
    samples_per_call=3,
)


def test_harness_seeding_is_one_request_for_all_samples_from_the_global_stream():
    (req,) = problem_requests(BASE, "k", "Python/1", "p", ("\ndef",), add_special_tokens=True)
    assert (req.n_samples, req.samples_per_call, req.sampling.seed) == (3, 3, None)
    assert req.stop_rule is StopRule.HARNESS_PYTHON and req.max_length == 512


def test_per_sample_seeds_come_from_the_key_task_and_index():
    setting = dataclasses.replace(BASE, seed_policy=SeedPolicy.PER_SAMPLE)
    reqs = problem_requests(
        setting, "k", "Python/1", "p", (), add_special_tokens=False, stop_rule=StopRule.STOP_WORDS
    )
    assert [r.sample_offset for r in reqs] == [0, 1, 2]
    assert [r.sampling.seed for r in reqs] == [sample_seed("k", "Python/1", i) for i in range(3)]
    assert all(r.n_samples == 1 and not r.add_special_tokens for r in reqs)


def test_greedy_never_gets_per_sample_seeds():
    greedy = dataclasses.replace(
        BASE, decoding=DecodingSpec("greedy", False), seed_policy=SeedPolicy.PER_SAMPLE
    )
    (req,) = problem_requests(greedy, "k", "t", "p", (), add_special_tokens=True)
    assert req.sampling.seed is None and not req.sampling.do_sample
