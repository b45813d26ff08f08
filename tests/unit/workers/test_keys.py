from __future__ import annotations

import dataclasses

import pytest

from workers.keys import KeyError_, canonical_json, sample_seed, setting_key
from workers.spec import (
    BackendName,
    BenchmarkSpec,
    DecodingSpec,
    Dtype,
    EngineSpec,
    HfOptions,
    ModelSpec,
    Quant,
    SeedPolicy,
    SettingSpec,
    Tuning,
)  # fmt: skip

MODEL = ModelSpec("m", "org/model", "abc123", "fam", 1.0, Tuning.BASE, "instruct")
GREEDY = DecodingSpec("greedy", False)
T02 = DecodingSpec("t0.2", True, 0.2, 0.95, 0)


def setting(**changes) -> SettingSpec:
    base = SettingSpec(
        engine=EngineSpec(MODEL, BackendName.HF, Dtype.BF16, Quant.NONE),
        benchmark=BenchmarkSpec("humanevalfix", "tests", "datahash"),
        template="instruct",
        decoding=GREEDY,
        max_length=2048,
    )
    return dataclasses.replace(base, **changes)


def test_canonical_json_is_sorted_and_compact():
    assert canonical_json({"b": 1, "a": [1, 2.5, None]}) == '{"a":[1,2.5,null],"b":1}'


@pytest.mark.parametrize("bad", [{1: "x"}, {"a": object()}, {"a": float("nan")}, {"a": {1, 2}}])
def test_canonical_json_rejects_non_json_values(bad):
    with pytest.raises(KeyError_):
        canonical_json(bad)


@pytest.mark.parametrize(
    "change",
    [
        {"template": "codellama"},
        {"max_length": 512},
        {"decoding": T02},
        {"n_samples": 2},
        {"benchmark": BenchmarkSpec("humanevalfix", "docs", "datahash")},
        {"benchmark": BenchmarkSpec("humanevalfix", "tests", "otherhash")},
        {"engine": EngineSpec(MODEL, BackendName.HF, Dtype.FP16, Quant.NONE)},
        {"engine": EngineSpec(MODEL, BackendName.HF, Dtype.FP16, Quant.INT4)},
        {"engine": EngineSpec(MODEL, BackendName.VLLM, Dtype.BF16, Quant.NONE)},
        {
            "engine": EngineSpec(
                dataclasses.replace(MODEL, revision="def"), BackendName.HF, Dtype.BF16, Quant.NONE
            )
        },
    ],
)
def test_output_relevant_fields_change_the_key(change):
    assert setting_key(setting(**change)) != setting_key(setting())


def test_labels_and_knobs_do_not_change_the_key():
    renamed = dataclasses.replace(MODEL, name="another-label", num_gpus=4)
    same = [
        setting(engine=EngineSpec(renamed, BackendName.HF, Dtype.BF16, Quant.NONE)),
        setting(decoding=DecodingSpec("renamed-greedy", False, 0.7, 0.5, 3)),  # greedy: ignored
        setting(seed=123),  # greedy: the seed cannot change the output
        setting(samples_per_call=1, seed_policy=SeedPolicy.PER_SAMPLE),
    ]
    assert {setting_key(s) for s in same} == {setting_key(setting())}


def test_sampled_settings_key_the_seed_and_policy():
    a = setting(decoding=T02)
    assert setting_key(dataclasses.replace(a, seed=1)) != setting_key(a)
    assert setting_key(dataclasses.replace(a, seed_policy=SeedPolicy.PER_SAMPLE)) != setting_key(a)


def test_backend_options_that_cannot_change_outputs_are_not_keyed():
    on_cpu = EngineSpec(MODEL, BackendName.HF, Dtype.BF16, Quant.NONE, hf=HfOptions(device="cpu"))
    assert setting_key(setting(engine=on_cpu)) == setting_key(setting())


def test_sample_seeds_are_pure_and_distinct():
    seeds = {sample_seed("k", f"Python/{i}", j) for i in range(50) for j in range(4)}
    assert len(seeds) == 200
    assert sample_seed("k", "Python/0", 0) == sample_seed("k", "Python/0", 0)
    assert all(0 <= s < 2**63 for s in seeds)
