"""`prompts`, `check-references`, `tiny-model`, `doctor`, `stage`: commands that run worker
code in the driver, or stage what the workers load (orchestrator/tools)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from orchestrator.cli.common import add_overrides as _add_overrides
from orchestrator.cli.common import out as _out


def register(sub) -> None:
    """Add the tool commands to the subparsers."""
    _register_prompts(sub)
    _register_machine(sub)


def _register_prompts(sub) -> None:
    """`prompts`, `check-references`, `tiny-model`: the benchmark's text and the test model."""
    p = sub.add_parser(
        "prompts",
        help="render the exact prompts a setting sends",
        description="Render the prompts of one setting, diff templates included (whether a "
        "template is scored is `run`'s concern). --template, --variant and --model may also be "
        "given as overrides: template=T, variant=V (or benchmark.variant=V), model=M.",
    )
    p.add_argument(
        "--variant",
        default=None,
        help="the benchmark's variant (default: its configured one; humanevalfix: tests | docs)",
    )
    p.add_argument(
        "--template", default=None, help="a harness template, own or chat (or template=T)"
    )
    p.add_argument(
        "--model",
        default=None,
        help="model config name, local folder or HF id: adds n_prompt_tokens (its tokenizer); "
        "needed for template own and chat (or model=M)",
    )
    p.add_argument("--format", default="jsonl", choices=["jsonl", "text"])
    p.add_argument("--limit", type=int, default=None, help="first N problems only")
    _add_overrides(p)

    p = sub.add_parser(
        "check-references", help="canonical fixes must pass 164/164 and buggy code 0/164"
    )
    p.add_argument("--variant", default="tests", choices=["tests", "docs"])
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.add_argument("--workers", type=int, default=None, help="parallel sandboxes")
    _add_overrides(p)

    p = sub.add_parser("tiny-model", help="build the offline test model (tiny random Llama)")
    p.add_argument("dir", help="output folder")
    p.add_argument("--seed", type=int, default=0)


def _register_machine(sub) -> None:
    """`doctor` and `stage`: what this machine can run, and the weights it needs."""
    p = sub.add_parser(
        "doctor",
        help="what this machine can run: backends, GPUs, sandbox, toolchains; with a grid "
        "(KEY=VALUE...), whether it can start here: weights, GPUs, cluster address",
    )
    p.add_argument("--json", action="store_true")
    _add_overrides(p)

    p = sub.add_parser(
        "stage",
        help="download every model revision a grid needs into this machine's Hugging Face "
        "cache (HF_HOME), for compute nodes without internet",
        description="On a login node that reaches the Hub, with HF_HOME on storage the compute "
        "nodes share: each model of the grid (KEY=VALUE... as for `run`) at its configured "
        "revision, the files transformers and vLLM load (config, tokenizer, one set of "
        "weights), through huggingface_hub's own download. Runs on the compute nodes then set "
        "the same HF_HOME and HF_HUB_OFFLINE=1 and load from the cache; `plan` shows the "
        "weights as in the HF cache. Built-in and local-folder models need nothing. Exits 2 "
        "when a model cannot be staged (repository or revision not found, gated, or the Hub "
        "unreachable: one TCP probe, preflight.hub_timeout_s), naming each.",
    )
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    _add_overrides(p)


PROMPT_OPTIONS = {
    "template": "template",
    "variant": "variant",
    "benchmark.variant": "variant",
    "model": "model",
}


def prompt_options(args) -> tuple[list[str], dict[str, str | None]]:
    """`--template T` or `template=T` (and so for variant and model): the overrides left and
    the three options. The same option given twice with two values is an error."""
    from orchestrator.errors import ConfigError

    chosen: dict[str, str | None] = {
        "template": args.template,
        "variant": args.variant,
        "model": args.model,
    }
    rest = []
    for override in args.overrides:
        key, _, value = override.partition("=")
        name = PROMPT_OPTIONS.get(key)
        if name is None:
            rest.append(override)
            continue
        if chosen[name] is not None and chosen[name] != value:
            raise ConfigError(f"{name} given twice: {chosen[name]!r} and {value!r}; give one")
        chosen[name] = value
    if chosen["template"] is None:
        raise ConfigError(
            "prompts needs a template: --template T or template=T (a harness template, own or chat)"
        )
    return rest, chosen


def cmd_prompts(args) -> int:
    from orchestrator.tools.prompts import render_prompts

    overrides, chosen = prompt_options(args)
    records = render_prompts(
        overrides, chosen["variant"], str(chosen["template"]), chosen["model"], args.limit
    )
    for record in records:
        if args.format == "jsonl":
            row: dict[str, str | int] = {"task_id": record.task_id, "prompt": record.prompt}
            if record.n_prompt_tokens is not None:
                row["n_prompt_tokens"] = record.n_prompt_tokens
            _out(json.dumps(row, ensure_ascii=False))
        else:
            tokens = f" ({record.n_prompt_tokens} tokens)" if record.n_prompt_tokens else ""
            _out(f"### {record.task_id}{tokens}\n{record.prompt}\n")
    return 0


def cmd_check_references(args) -> int:
    from orchestrator.tools.references import check_references

    counts = check_references(args.overrides, args.variant, workers=args.workers)
    if args.json:
        _out(json.dumps(counts))
    else:
        for name in ("canonical", "buggy"):
            c = counts[name]
            _out(f"{name:9s} {c['passed']:3d}/{c['total']} passed")
    ok = counts["canonical"]["passed"] == counts["canonical"]["total"] and (
        counts["buggy"]["passed"] == 0
    )
    return 0 if ok else 1


def cmd_tiny_model(args) -> int:
    from workers.backends.modelprep import build_tiny_model

    path = build_tiny_model(args.dir, seed=args.seed)
    _out(f"tiny model written to {path}")
    _out(tiny_model_usage(path))
    return 0


def tiny_model_usage(path: os.PathLike) -> str:
    """How to run the folder: the `tiny` model entry with its repo_id pointed at it (an absolute
    path, so the command works from any folder)."""
    folder = shlex.quote(str(Path(path).resolve()))
    return (
        f"use it with the overrides model=tiny model.repo_id={folder}, e.g.\n"
        f"  reprogrid run model=tiny model.repo_id={folder} store=STORE"
    )


def cmd_doctor(args) -> int:
    from orchestrator.tools.doctor import doctor_report, render_doctor

    data = doctor_report(args.overrides)
    _out(json.dumps(data, indent=2) if args.json else render_doctor(data))
    # A grid with blocking problems exits 2, as `plan` and `run` would.
    return 2 if data.get("grid", {}).get("blocking") else 0


def cmd_stage(args) -> int:
    from orchestrator.tools.stage import failures, render_stage, stage

    report = stage(args.overrides)
    _out(json.dumps(report.to_json(), indent=2) if args.json else render_stage(report))
    for line in failures(report):
        sys.stderr.write(f"reprogrid stage: error: {line}\n")
    return 0 if report.ok else 2


COMMANDS = {
    "prompts": cmd_prompts,
    "check-references": cmd_check_references,
    "tiny-model": cmd_tiny_model,
    "doctor": cmd_doctor,
    "stage": cmd_stage,
}
