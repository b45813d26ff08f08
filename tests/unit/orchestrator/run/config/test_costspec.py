"""The `estimate:` and `preflight:` blocks and cluster.connect_timeout_s: parsed, range-checked."""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.run.config.load import load_run_config
from orchestrator.run.config.specs import EstimateSpec, PreflightSpec


def test_defaults_are_the_config_files():
    config = load_run_config(["model=tiny"])
    assert config.estimate == EstimateSpec()
    assert config.preflight == PreflightSpec()
    assert config.cluster.connect_timeout_s == 10.0
    assert load_run_config(["model=tiny", "cluster=ray"]).cluster.connect_timeout_s == 10.0


def test_values_are_parsed():
    config = load_run_config(
        [
            "model=tiny",
            "estimate.gpu=h100",
            "estimate.bandwidth_gbps=2000",
            "estimate.output_tokens=300",
            "preflight.hub_timeout_s=2.5",
        ]
    )
    assert (config.estimate.gpu, config.estimate.bandwidth_gbps) == ("h100", 2000.0)
    assert config.estimate.output_tokens == 300 and config.preflight.hub_timeout_s == 2.5


@pytest.mark.parametrize(
    ("override", "needles"),
    [
        ("estimate.gpu=h10", ["Unknown estimate.gpu 'h10'", "Did you mean: h100", "a100-40gb"]),
        ("estimate.output_tokens=0", ["estimate.output_tokens must be an integer >= 1"]),
        ("estimate.bandwidth_gbps=-1", ["estimate.bandwidth_gbps", "> 0"]),
        ("estimate.chars_per_token=0", ["estimate.chars_per_token", ">= 0.5"]),
        ("estimate.cpu_gflops=0", ["estimate.cpu_gflops", "> 0"]),
        ("preflight.hub_timeout_s=0", ["preflight.hub_timeout_s", "> 0"]),
        ("cluster.connect_timeout_s=0", ["cluster.connect_timeout_s", "> 0", "unreachable"]),
        ("cluster.connect_timeout_s=900", ["cluster.connect_timeout_s", "<= 600"]),
    ],
)
def test_bad_values_name_key_value_and_range(override, needles):
    with pytest.raises(ConfigError) as info:
        load_run_config(["model=tiny", override])
    for needle in needles:
        assert needle in str(info.value)
