"""Every option is checked at the CLI edge: ranges, types, group options and unknown keys are
errors that name the key, the value and what is valid (Trust §6, §7)."""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.run.config.load import load_run_config
from orchestrator.run.config.options import MIN_MEMORY_MB, OPTION_NUMBERS, Range, number
from workers.backends.registry import backend_definitions

TINY = ["model=tiny"]


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        (["execution.memory_mb=0"], ["execution.memory_mb", f">= {MIN_MEMORY_MB}", "got 0"]),
        (["execution.timeout_s=-1"], ["execution.timeout_s", "> 0", "got -1"]),
        (["benchmark.limit=-5"], ["benchmark.limit", ">= 1 (or null)", "got -5"]),
        (["benchmark.limit=abc"], ["benchmark.limit must be an integer", "'abc'"]),
        (["benchmark.limit=2.5"], ["benchmark.limit must be an integer", "2.5"]),
        (["execution.max_processes=0"], ["execution.max_processes"]),
        (["cluster.exec_cpus=0"], ["cluster.exec_cpus", "> 0"]),
        (["cluster.max_retries=-1"], ["cluster.max_retries"]),
        (["vllm.gpu_memory_utilization=1.5"], ["vllm.gpu_memory_utilization", "<= 1"]),
        (["vllm.enforce_eager=maybe"], ["vllm.enforce_eager must be true or false"]),
        (["hf.device=gpu"], ["Unknown hf.device 'gpu'", "auto, cpu, cuda"]),
        (["seed=-1"], ["seed must be an integer >= 0", "NumPy"]),
        (["n_samples=0"], ["n_samples"]),
        (["grid.max_length=512,0"], ["max_length", "got '0'"]),
        (
            ["decoding=hot", "+decodings.hot={do_sample:true,temperature:0.5,top_p:1.5,top_k:0}"],
            ["decodings.hot.top_p", "<= 1"],
        ),
        (
            ["decoding=hot", "+decodings.hot={do_sample:true,temperature:0,top_p:0.9,top_k:0}"],
            ["decodings.hot.temperature", "> 0"],
        ),
        (["decodings.t0.2.top_p=0.5"], ["Unknown config key under 'decodings' 't0'", "t0.2"]),
    ],
)
def test_out_of_range_values_are_errors_naming_key_value_and_range(overrides, needles):
    with pytest.raises(ConfigError) as info:
        load_run_config([*TINY, *overrides])
    for needle in needles:
        assert needle in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["experiment=paper-table"], "Did you mean: paper-table2?"),
        (["modle=tiny"], "Did you mean: model?"),
        (["+modle=tiny"], "Did you mean: model?"),
        (["+benchmark.limt=3"], "Did you mean: limit?"),
        (["benchmark.limt=3"], "under 'benchmark'"),
        (["model=tinyy"], "Did you mean: tiny?"),
        (["model=tiny,tinyy"], "Did you mean: tiny?"),
        (["grid=paper6"], "Did you mean: paper60?"),
        (["cluster=locl"], "Did you mean: local?"),
        (["benchmark=infibnch"], "Did you mean: infibench?"),
        (["literature=humanevalfix"], "Unknown config key 'literature'"),
    ],
)
def test_typos_are_errors_with_a_suggestion(overrides, needle):
    with pytest.raises(ConfigError) as info:
        load_run_config(overrides if "model" in overrides[0] else [*TINY, *overrides])
    assert needle in str(info.value)


def test_valid_values_pass_and_keep_their_types():
    config = load_run_config(
        [
            *TINY,
            "benchmark.limit=16",
            "execution.timeout_s=3",
            "cluster.num_gpus=0",
            "execution.workers=null",
        ]
    )
    assert config.benchmark.limit == 16 and isinstance(config.benchmark.limit, int)
    assert config.limits.timeout_s == 3.0 and config.cluster.num_gpus == 0
    assert config.exec_workers is None


def test_no_model_is_not_a_default_model():
    assert load_run_config([]).models == ()


def test_every_numeric_option_of_the_root_config_has_a_range():
    """A numeric option added to sweeps/config.yaml without a range would go unchecked."""
    from omegaconf import OmegaConf

    from orchestrator.run.config.compose import compose_config

    cfg = OmegaConf.to_container(compose_config(["model=tiny"]), resolve=True)
    numeric = set()

    def walk(node, prefix=""):
        for key, value in node.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and key not in ("decodings", "model", "grid", "paths"):
                walk(value, path + ".")
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                numeric.add(path)

    walk(cfg)
    cell = {"max_length", "n_samples", "samples_per_call", "seed"}
    backends = {
        f"{d.config_block}.{f.name}"
        for d in backend_definitions()
        for f in d.option_fields
        if d.config_block
    }
    assert numeric - cell <= set(OPTION_NUMBERS) | backends


@pytest.mark.parametrize(
    ("value", "spec", "ok"),
    [
        (1, Range(int, 1), True),
        (0, Range(int, 1), False),
        (None, Range(int, 1), False),
        (None, Range(int, 1, nullable=True), True),
        (0.0, Range(float, 0, low_open=True), False),
        (1e-9, Range(float, 0, low_open=True), True),
        (True, Range(int, 0), False),
        (float("nan"), Range(float, 0), False),
        ("7", Range(int, 1, 10), True),
    ],
)
def test_number_table(value, spec, ok):
    if ok:
        number("k", value, spec)
    else:
        with pytest.raises(ConfigError, match="^k must be"):
            number("k", value, spec)
