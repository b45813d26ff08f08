"""Hugging Face transformers, the harness's backend: one prompt per `generate` call, harness
semantics (workers/backends/harness.py), bitsandbytes for 8/4-bit; or, with
`generation.batch_size` > 1, several prompts decoding together (`batched.py`). The definition
and its options; the engine is `engine.py` (imports torch and transformers)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.backends.base import BackendDefinition, OptionField, options_of
from workers.spec import BackendOptions, EngineSpec, SeedPolicy, SettingSpec

# What `backend=auto` decodes together when it places a seed_policy=per_sample setting on
# transformers (the fast path) and generation.batch_size is null: the batch the issue's
# measurements use (perf/RESULTS.md, "Batched transformers").
AUTO_BATCH_SIZE = 8

HARNESS_STREAM_REASON = (
    "batched transformers generation (generation.batch_size > 1) samples each call from its "
    "own seed; sampling under seed_policy=harness draws from one global stream in order, "
    "which needs generation.batch_size=1 (or seed_policy=per_sample)"
)


@dataclass(frozen=True)
class HfOptions(BackendOptions):
    device: str = "auto"  # "auto" (cuda if visible, else cpu), "cpu" or "cuda"
    # Prompts decoding together (`generation.batch_size`); None: 1, the harness's one prompt
    # per call, except where backend=auto batches a per_sample setting (AUTO_BATCH_SIZE).
    batch_size: int | None = None

    @property
    def prompts_per_call(self) -> int:
        return self.batch_size or 1


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

    def options(self, values: Mapping[str, Any], config: Mapping[str, Any]) -> HfOptions:
        """Its block's `device`, and `generation.batch_size` (checked with the other options,
        orchestrator/run/config/options.py)."""
        batch = (config.get("generation") or {}).get("batch_size")
        return HfOptions(**values, batch_size=None if batch is None else int(batch))

    def gpu_requirement(self, engine: EngineSpec) -> str | None:
        return "hf.device=cuda" if options_of(engine, HfOptions).device == "cuda" else None

    def prompts_per_call(self, engine: EngineSpec) -> int:
        return options_of(engine, HfOptions).prompts_per_call

    def auto_engine(self, engine: EngineSpec, setting: SettingSpec) -> EngineSpec:
        """The fast path batches transformers where the setting gave up the harness's seeding
        (per_sample) and no batch size was asked for."""
        options = options_of(engine, HfOptions)
        if options.batch_size is not None or setting.seed_policy is not SeedPolicy.PER_SAMPLE:
            return engine
        batched = dataclasses.replace(options, batch_size=AUTO_BATCH_SIZE)
        return dataclasses.replace(engine, options=batched)

    def skip_reason(self, setting: SettingSpec) -> str | None:
        if self.prompts_per_call(setting.engine) > 1 and setting.sequential_stream:
            return HARNESS_STREAM_REASON
        return None

    def key_fields(self, engine: EngineSpec) -> dict[str, Any]:
        # Padding changes what the kernels reduce over (a greedy output can differ from batch
        # 1 in 16-bit and 8-bit): the batch size is keyed when it is over 1, so every setting
        # of one prompt per call keeps the key it had before the option existed.
        batch = self.prompts_per_call(engine)
        return {"hf_batch_size": batch} if batch > 1 else {}


HF = HfDefinition()
