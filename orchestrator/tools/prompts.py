"""`prompts`: the exact prompt text a setting sends, one JSON line per problem.

The prompts are the requests the setting's benchmark builds for the grid cell the options
describe (the same code path as `run`), so what is printed is what a backend receives."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from orchestrator.errors import ConfigError
from orchestrator.run.api import available, load_run_config, prepare
from workers.spec import ModelSpec, Tuning


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
    tokenizer = None
    if model is not None:
        from workers.backends.tokens import load_tokenizer  # lazy: imports transformers

        try:
            tokenizer = load_tokenizer(config.models[0])
        except (OSError, ValueError) as e:
            # transformers raises OSError (offline, not cached, not a repo id) or ValueError
            # (an unknown tokenizer class): name the model and what to do, not a traceback.
            first = (
                str(e).strip().splitlines()[0].rstrip(".") if str(e).strip() else type(e).__name__
            )
            raise ConfigError(
                f"the tokenizer of model {model!r} ({config.models[0].repo_id}) is not "
                f"available: {first}. `prompts --model` needs it for n_prompt_tokens and the "
                "chat template: use a local model folder, or fetch the model into the Hugging "
                "Face cache first"
            ) from e
    chat = tokenizer.render_chat if tokenizer is not None else None
    for request in benchmark.requests(cell.setting, cell.key, chat):
        count = (
            tokenizer.count(request.prompt, request.add_special_tokens)
            if tokenizer is not None
            else None
        )
        yield PromptRecord(request.task_id, request.prompt, count)
