"""Grid expansion from Hydra configs (composed for real, as `reprogrid plan` does)."""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.run.config.load import load_run_config
from orchestrator.run.plan.planner import plan_settings
from orchestrator.run.prepare.grid import Environment, expand_grid
from workers.backends.vllm import FP4_REASON as VLLM_FP4_REASON
from workers.backends.vllm import INT8_REASON as VLLM_INT8_REASON
from workers.keys import engine_key

BOTH = Environment(installed=frozenset({"hf", "vllm"}))


def cells(overrides, env=None):
    config = load_run_config(["model=tiny", *overrides])
    return expand_grid(config, "datahash", env or Environment())


def test_paper60_has_60_distinct_settings_in_5_engine_units():
    grid = cells(["grid=paper60", "model=deepseekcoder-1.3b-instruct"])
    assert len(grid) == 60
    assert len({c.key for c in grid}) == 60
    assert not any(c.skipped for c in grid)
    plan = plan_settings(grid, {})
    assert plan.n_engine_loads == 5
    assert sorted(len(u.settings) for u in plan.units) == [12] * 5
    assert {c.setting.template for c in grid} == {"deepseek", "instruct"}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["grid.precision=bf16,fp16"], 24),
        (["grid.max_length=2048"], 30),
        (["grid.backend=hf,vllm", "seed_policy=per_sample"], 120),
        (["grid.variant=tests,docs"], 120),
        (["grid.n_samples=1,5"], 120),
        (["template=own,instruct,chat"], 90),
        (["model=deepseekcoder-1.3b-base,codellama-7b-base"], 120),
    ],
)
def test_overriding_an_axis_changes_the_count(overrides, expected):
    base = ["grid=paper60", "model=deepseekcoder-1.3b-instruct"]
    if overrides[0].startswith("model="):
        base = ["grid=paper60"]
    assert len(cells(base + overrides)) == expected


def test_vllm_int8_and_fp4_are_explicit_skips_and_auto_routes_them_to_hf():
    grid = cells(
        ["grid=paper60", "backend=vllm", "seed_policy=per_sample"],
        BOTH,
    )
    skipped = [c for c in grid if c.skipped]
    assert len(skipped) == 24
    assert {c.setting.engine.quant.value for c in skipped} == {"int8", "int4"}
    assert {c.skip_reason for c in skipped} == {VLLM_INT8_REASON, VLLM_FP4_REASON}
    auto = cells(
        ["grid=paper60", "backend=auto", "seed_policy=per_sample"],
        BOTH,
    )
    assert not any(c.skipped for c in auto)
    by_quant = {(c.setting.engine.quant.value, c.setting.engine.backend) for c in auto}
    assert {("int8", "hf"), ("int4", "hf"), ("none", "vllm")} <= by_quant
    assert ("int8", "vllm") not in by_quant and ("int4", "vllm") not in by_quant
    # vLLM's in-flight 4-bit is nf4: an nf4 setting may run there
    nf4 = cells(
        ["grid=paper60", "backend=auto", "seed_policy=per_sample", "bnb_4bit_quant_type=nf4"],
        BOTH,
    )
    assert ("int4", "vllm") in {
        (c.setting.engine.quant.value, c.setting.engine.backend) for c in nf4
    }


def test_auto_without_vllm_installed_uses_hf():
    grid = cells(["backend=auto"], Environment(installed=frozenset({"hf"})))
    assert {c.setting.engine.backend for c in grid} == {"hf"}


def test_precision_maps_to_dtype_and_quant_like_the_harness():
    grid = cells(
        [
            "grid=paper60",
            "grid.precision=int8,int4",
            "grid.template=own",
            "grid.decoding=greedy",
            "grid.max_length=2048",
        ]
    )
    engines = {
        (
            c.setting.engine.dtype.value,
            c.setting.engine.quant.value,
            c.setting.engine.bnb_4bit_quant_type.value,
        )
        for c in grid
    }
    assert engines == {("fp16", "int8", "fp4"), ("fp16", "int4", "fp4")}


def test_engine_key_ignores_setting_fields():
    grid = cells(["grid=engine12"])
    assert len(grid) == 12
    assert len({engine_key(c.setting.engine) for c in grid}) == 1


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["template=codelama"], "Did you mean: codellama?"),
        (["dtype=fp8"], "Valid: fp32, fp16, bf16"),
        (["grid.precison=bf16"], "Did you mean: precision?"),
        (["backend=vlm"], "Did you mean: vllm?"),
        (["decoding=hot"], "t<temperature>"),
        (["model=deepseekcoder-1.3b,tiny"], "model"),
        (["max_length=0"], "max_length must be an integer >= 1"),
        (["benchmark.variant=doc"], "Valid: tests, docs"),
    ],
)
def test_bad_values_name_the_value_and_the_choices(overrides, needle):
    with pytest.raises(ConfigError) as info:
        load_run_config(overrides)
    assert needle in str(info.value)
