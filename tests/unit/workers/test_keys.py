from __future__ import annotations

import dataclasses

import pytest

from workers.backends.hf import HfOptions
from workers.backends.replay import ReplayOptions
from workers.backends.vllm import VllmOptions
from workers.keys import (
    KEY_SCHEMA_VERSION,
    UnkeyableValue,
    canonical_json,
    engine_key,
    path_keyed,
    sample_seed,
    setting_key,
)
from workers.spec import (
    BenchmarkSpec,
    DecodingSpec,
    Dtype,
    EngineSpec,
    LengthSemantics,
    ModelSpec,
    Quant,
    SeedPolicy,
    SettingSpec,
    Tuning,
)

MODEL = ModelSpec("m", "org/model", "abc123", "fam", 1.0, Tuning.BASE, "instruct")
GREEDY = DecodingSpec("greedy", False)
T02 = DecodingSpec("t0.2", True, 0.2, 0.95, 0)


def setting(**changes) -> SettingSpec:
    base = SettingSpec(
        engine=EngineSpec(MODEL, "hf", Dtype.BF16, Quant.NONE),
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
    with pytest.raises(UnkeyableValue):
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
        {"engine": EngineSpec(MODEL, "hf", Dtype.FP16, Quant.NONE)},
        {"engine": EngineSpec(MODEL, "hf", Dtype.FP16, Quant.INT4)},
        {"engine": EngineSpec(MODEL, "vllm", Dtype.BF16, Quant.NONE)},
        {
            "engine": EngineSpec(
                dataclasses.replace(MODEL, revision="def"), "hf", Dtype.BF16, Quant.NONE
            )
        },
    ],
)
def test_output_relevant_fields_change_the_key(change):
    assert setting_key(setting(**change)) != setting_key(setting())


def test_labels_and_knobs_do_not_change_the_key():
    renamed = dataclasses.replace(MODEL, name="another-label", num_gpus=4)
    same = [
        setting(engine=EngineSpec(renamed, "hf", Dtype.BF16, Quant.NONE)),
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
    on_cpu = EngineSpec(MODEL, "hf", Dtype.BF16, Quant.NONE, options=HfOptions(device="cpu"))
    assert setting_key(setting(engine=on_cpu)) == setting_key(setting())


def test_a_local_folder_is_keyed_by_its_identity_not_its_path():
    """Two paths of one folder content give one key; the path-keyed form (what stores written
    before identities hold) is today's key of the same spec without an identity."""
    at_a = dataclasses.replace(MODEL, repo_id="/mnt/a/model", identity="sha256:" + "1" * 64)
    at_b = dataclasses.replace(at_a, repo_id="/scratch/b/model")
    other = dataclasses.replace(at_a, identity="sha256:" + "2" * 64)

    def keyed(m):
        return setting(engine=EngineSpec(m, "hf", Dtype.BF16, Quant.NONE))

    assert setting_key(keyed(at_a)) == setting_key(keyed(at_b)) != setting_key(keyed(other))
    assert engine_key(keyed(at_a).engine) == engine_key(keyed(at_b).engine)
    old = path_keyed(keyed(at_a))
    assert old is not None and old.engine.model.identity is None
    assert setting_key(old) != setting_key(path_keyed(keyed(at_b)))  # the path was the model
    assert path_keyed(setting()) is None  # a Hub model: its key never changed


def test_sample_seeds_are_pure_and_distinct():
    seeds = {sample_seed("k", f"Python/{i}", j) for i in range(50) for j in range(4)}
    assert len(seeds) == 200
    assert all(0 <= s < 2**63 for s in seeds)


# -- pins: the keys of fixed settings, as literals -------------------------------------------------
# A change to key derivation orphans every stored result. If one of these fails, the change was
# either an accident (undo it) or deliberate: then bump KEY_SCHEMA_VERSION (or add a field to the
# keys of the one class of settings whose meaning changed), update the literals here, and say in
# the changelog which stores it invalidates.

T08 = DecodingSpec("t0.8", True, 0.8, 0.95, 0)
PINNED = {
    "ad11ebac2d7d0e83cd615d16fb8cd1db84b967042dad1736efd86de099957982": setting(),
    "d8b2ef162be3c0054a5bd5421f7ab26f584be29c4a1666d94a04b441d60e8d23": setting(
        engine=EngineSpec(MODEL, "hf", Dtype.FP16, Quant.INT4)
    ),
    "b5d8f9f71874f2dc8684ffd073e2f326c60a59aca04a591ce5a4dfad7b846370": setting(
        engine=EngineSpec(
            MODEL, "vllm", Dtype.BF16, Quant.NONE, options=VllmOptions(batch_invariant=True)
        )
    ),
    "5e5ca29e5fcedbed06b546d2d59da249a577cdf72b3dd72a33d785767fcd91e1": setting(
        decoding=T08, n_samples=5, seed=1, seed_policy=SeedPolicy.PER_SAMPLE
    ),
    # Changed knowingly (was f1e44a93...): harness-seeded sampling now reproduces the
    # harness's DataLoader draw, so samples stored under the old stream are not reused.
    "c59c16da97b4db0d5b73fa7eafb20596a23ecab49bb041b0546c2a945ee00d45": setting(
        decoding=T08, n_samples=4, samples_per_call=2
    ),
    "d7815e1caac915486c39562483d1ad0321215a75fc4738caf8e27a9118e1d2d8": setting(
        benchmark=BenchmarkSpec("humanevalfix", "docs", "datahash", limit=10),
        max_length=512,
        length_semantics=LengthSemantics.NEW_TOKENS,
    ),
    # batched transformers (generation.batch_size=8): the batch size is keyed over 1
    "85a55953375ee6c529dd40f1a02aec1382d7c314fd311cde91a1199ca82fc351": setting(
        engine=EngineSpec(MODEL, "hf", Dtype.FP16, Quant.INT8, options=HfOptions(batch_size=8)),
        decoding=T08,
        n_samples=5,
        seed=1,
        seed_policy=SeedPolicy.PER_SAMPLE,
    ),
    "aab750d79adbb3c6c3587c8eb5baa892e6a50a729307c4d90e1291efbe4856cc": setting(
        engine=EngineSpec(
            MODEL,
            "replay",
            Dtype.BF16,
            Quant.NONE,
            options=ReplayOptions(path="x.jsonl", sha256="r" * 64),
        )
    ),
}


@pytest.mark.parametrize("expected", PINNED)
def test_setting_keys_are_pinned(expected):
    assert setting_key(PINNED[expected]) == expected


def test_transformers_batch_size_is_keyed_only_over_one():
    one, unset = HfOptions(batch_size=1), HfOptions()
    for options in (one, unset):
        engine = EngineSpec(MODEL, "hf", Dtype.BF16, Quant.NONE, options=options)
        assert setting_key(setting(engine=engine)) == setting_key(setting())
    keys = {
        setting_key(setting(engine=EngineSpec(MODEL, "hf", Dtype.BF16, Quant.NONE, options=o)))
        for o in (HfOptions(batch_size=4), HfOptions(batch_size=8), unset)
    }
    assert len(keys) == 3


def test_engine_key_and_seeds_are_pinned():
    engine = setting().engine
    assert engine_key(engine) == "66b8fe59dc0997a1db5ec238897bc851cdfa0f44f9ef189e47e7f64a23b1c207"
    assert sample_seed("k", "Python/0", 0) == 6153754597186695452
    assert sample_seed("k", "Python/163", 3) == 7033171575586217675
    assert KEY_SCHEMA_VERSION == 1
