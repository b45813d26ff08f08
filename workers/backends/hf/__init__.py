"""Hugging Face transformers, the harness's backend: one prompt per `generate` call, harness
semantics (workers/backends/harness.py), bitsandbytes for 8/4-bit. The definition and its
options; the engine is `engine.py` (imports torch and transformers)."""

from __future__ import annotations

from dataclasses import dataclass

from workers.backends.base import BackendDefinition, OptionField, options_of
from workers.spec import BackendOptions, EngineSpec


@dataclass(frozen=True)
class HfOptions(BackendOptions):
    device: str = "auto"  # "auto" (cuda if visible, else cpu), "cpu" or "cuda"


class HfDefinition(BackendDefinition):
    name = "hf"
    engine = "workers.backends.hf.engine:HfBackend"
    export_name = "transformers"
    library = "transformers"
    distributions = ("torch", "transformers", "tokenizers", "accelerate", "bitsandbytes")
    auto_rank = 1  # backend=auto's fallback: it runs every setting the harness runs
    config_block = "hf"
    option_fields = (OptionField("device", str, choices=("auto", "cpu", "cuda")),)
    options_type = HfOptions

    def gpu_requirement(self, engine: EngineSpec) -> str | None:
        return "hf.device=cuda" if options_of(engine, HfOptions).device == "cuda" else None


HF = HfDefinition()
