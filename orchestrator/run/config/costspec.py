"""The `estimate:` and `preflight:` config blocks as frozen specs (docs/config.md, docs/cost.md).

orchestrator/run/config/load.py hands their plain mappings here; nothing here reads the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.analysis.cost import GPUS
from orchestrator.run.config.options import choice_error, option

GPU_CHOICES = ("auto", *GPUS)


@dataclass(frozen=True)
class EstimateSpec:
    """The cost model's inputs that are the user's to set; the defaults are config.yaml's."""

    gpu: str = "auto"  # "auto" (the local GPU, else cost.REFERENCE_GPU) or a key of cost.GPUS
    bandwidth_gbps: float | None = None  # that GPU's memory bandwidth, GB/s; None: the table's
    output_tokens: int = 200  # prior: output tokens per sample, capped by the length limit
    chars_per_token: float = 3.5  # prompt tokens from characters when no tokenizer is at hand
    # An engine on CPU, one thread (measured on this project's 2-core machine, docs/cost.md).
    cpu_bandwidth_gbps: float = 20.0
    cpu_gflops: float = 90.0


@dataclass(frozen=True)
class PreflightSpec:
    """Checks made before Ray starts or a GPU is held; the defaults are config.yaml's."""

    hub_timeout_s: float = 10.0  # per Hub request of the weights check


def estimate_spec(block: Mapping[str, Any]) -> EstimateSpec:
    """The `estimate:` block, range-checked (ConfigError naming the key)."""
    cfg = {"estimate": block}
    gpu = str(block["gpu"])
    if gpu not in GPU_CHOICES:
        raise choice_error("estimate.gpu", gpu, GPU_CHOICES)
    return EstimateSpec(
        gpu=gpu,
        bandwidth_gbps=option(cfg, "estimate.bandwidth_gbps"),
        output_tokens=option(cfg, "estimate.output_tokens"),
        chars_per_token=option(cfg, "estimate.chars_per_token"),
        cpu_bandwidth_gbps=option(cfg, "estimate.cpu_bandwidth_gbps"),
        cpu_gflops=option(cfg, "estimate.cpu_gflops"),
    )


def preflight_spec(block: Mapping[str, Any]) -> PreflightSpec:
    """The `preflight:` block, range-checked."""
    return PreflightSpec(hub_timeout_s=option({"preflight": block}, "preflight.hub_timeout_s"))
