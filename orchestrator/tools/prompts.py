"""`prompts`: the exact prompt text a setting sends, one JSON line per problem.

The prompts are the requests the setting's benchmark builds for the grid cell the options
describe (the same code path as `run`), so what is printed is what a backend receives."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError
from orchestrator.run.api import (
    RunConfig,
    available,
    load_run_config,
    needs_hub,
    offline_hub,
    prepare,
    probe_hub,
)
from workers.spec import ModelSpec, Tuning

if TYPE_CHECKING:
    from workers.backends.tokens import TokenizerHandle


@dataclass(frozen=True)
class PromptRecord:
    task_id: str
    prompt: str
    n_prompt_tokens: int | None  # with a tokenizer only


def _ad_hoc_model(name: str) -> ModelSpec:
    """A local folder or HF id taken as is (its own template is unknown: `instruct`)."""
    return ModelSpec(name, name, "main", "unknown", 0.0, Tuning.INSTRUCT, "instruct")


def render_prompts(
    overrides: Sequence[str],
    variant: str | None,
    template: str,
    model: str | None,
    limit: int | None,
) -> Iterator[PromptRecord]:
    """Every prompt of the setting `template` x `variant` for `model` (a config name, a local
    folder or an HF id), first `limit` problems; token counts need the model's tokenizer."""
    if template in ("own", "chat") and model is None:
        why = "the config's own template" if template == "own" else "its tokenizer's chat template"
        raise ConfigError(f"template {template!r} needs --model ({why})")
    configured = model is not None and model in available("model")
    extra = [f"model={model}"] if configured else []
    if variant is not None:
        extra.append(f"benchmark.variant={variant}")
    config = load_run_config([*overrides, *extra, f"template={template}"])
    if model is not None and not configured:
        config = dataclasses.replace(config, models=(_ad_hoc_model(model),))
    elif not config.models:
        # A harness template's text does not depend on the model; the grid needs one anyway.
        config = dataclasses.replace(config, models=(_ad_hoc_model("no-model"),))
    if limit is not None:
        config = dataclasses.replace(
            config, benchmark=dataclasses.replace(config.benchmark, limit=limit)
        )
    prepared = prepare(config)  # the same cells as `run` (diff templates too: they render)
    config, benchmark, cells = prepared.config, prepared.benchmark, prepared.cells
    if len(cells) != 1:
        raise ConfigError(f"the options select {len(cells)} settings; prompts renders one")
    cell = cells[0]
    tokenizer = _tokenizer(config, model) if model is not None else None
    chat = tokenizer.render_chat if tokenizer is not None else None
    for request in benchmark.requests(cell.setting, cell.key, chat):
        count = (
            tokenizer.count(request.prompt, request.add_special_tokens)
            if tokenizer is not None
            else None
        )
        yield PromptRecord(request.task_id, request.prompt, count)


def _tokenizer(config: RunConfig, model: str) -> TokenizerHandle:
    """The model's tokenizer; from the HF cache alone when one probe finds the Hub offline or
    unreachable (transformers would retry every file it asks for: preflight/hub.py)."""
    from workers.backends.tokens import load_tokenizer  # lazy: imports transformers

    spec = config.models[0]
    hub = probe_hub(config.preflight.hub_timeout_s) if needs_hub(spec) else None
    offline = hub is not None and not hub.reachable
    try:
        with offline_hub() if offline else nullcontext():
            return load_tokenizer(spec)
    except (OSError, ValueError) as e:
        # transformers raises OSError (offline, not cached, not a repo id) or ValueError
        # (an unknown tokenizer class): name the model and what to do, not a traceback.
        text = str(e).strip()
        first = text.splitlines()[0].rstrip(".") if text else type(e).__name__
        if hub is not None and offline and isinstance(e, OSError):  # the cache lacks it
            first = f"not in the Hugging Face cache and {hub.reason()}"
        raise ConfigError(
            f"the tokenizer of model {model!r} ({spec.repo_id}) is not available: {first}. "
            "`prompts --model` needs it for n_prompt_tokens and the chat template: use a local "
            "model folder, or fetch the model into the Hugging Face cache first"
        ) from e
