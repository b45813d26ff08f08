"""`prompts`: the exact prompt text a setting sends, one JSON line per problem."""

from __future__ import annotations

import json
from collections.abc import Iterator

from orchestrator.benchmarks import load_benchmark
from orchestrator.config import ConfigError, available, compose_config, load_run_config, model_spec
from workers.benchmarks.humanevalfix.prompts import CHAT_TEMPLATE, build_prompt, check_template
from workers.spec import ModelSpec, Variant


def resolve_model(name: str | None, overrides) -> ModelSpec | None:
    """A model config name, or a local folder / HF id taken as is."""
    if name is None:
        return None
    if name in available("model"):
        return model_spec(compose_config([*overrides, f"model={name}"]).model)
    return ModelSpec(name, name, "main", "unknown", 0.0, "instruct", "instruct")


def render_prompts(args) -> Iterator[str]:
    config = load_run_config([*args.overrides, f"benchmark.variant={args.variant}"])
    loaded = load_benchmark(config.benchmark, cache_dir=config.cache_dir)
    problems = loaded.adapter.problem_set.problems[: args.limit]
    variant = Variant(args.variant)
    model = resolve_model(args.model, args.overrides)
    template = args.template
    if template == "own":
        if model is None:
            raise ConfigError(
                "template 'own' needs --model (its own template comes from the config)"
            )
        template = model.own_template
    check_template(template)
    tokenizer = None
    if model is not None:
        from workers.backends.tokens import load_tokenizer  # lazy: imports transformers

        tokenizer = load_tokenizer(model)
    elif template == CHAT_TEMPLATE:
        raise ConfigError("template 'chat' needs --model (its tokenizer's chat template)")
    for problem in problems:
        if template == CHAT_TEMPLATE:
            from workers.benchmarks.humanevalfix.prompts import build_chat_prompt, chat_messages

            rendered = tokenizer.render_chat(chat_messages(problem, variant))
            prompt = build_chat_prompt(rendered, problem, variant)
        else:
            prompt = build_prompt(problem, variant, template)
        record = {"task_id": problem.task_id, "prompt": prompt}
        if tokenizer is not None:
            record["n_prompt_tokens"] = tokenizer.count(prompt, template != CHAT_TEMPLATE)
        if args.format == "jsonl":
            yield json.dumps(record, ensure_ascii=False)
        else:
            yield f"### {problem.task_id}" + (
                f" ({record['n_prompt_tokens']} tokens)" if "n_prompt_tokens" in record else ""
            )
            yield prompt
            yield ""
