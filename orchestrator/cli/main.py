"""The `reprogrid` command line: parse arguments, call one library function, print the result.

Hydra overrides follow the subcommand (`reprogrid run model=tiny template=instruct ...`). Only
this module turns exceptions into exit codes and messages.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from orchestrator.cli import backends as cli_backends
from orchestrator.cli import report as cli_report
from orchestrator.errors import ClusterError, ConfigError
from storage.store import StoreError

# Modules that add subcommands: each has register(subparsers) and COMMANDS {name: function}.
EXTENSIONS = (cli_report, cli_backends)

logger = logging.getLogger("reprogrid")

OVERRIDES_HELP = (
    "Hydra overrides, e.g. model=tiny template=instruct decoding=greedy max_length=2048 "
    "dtype=bf16 quant=none backend=hf. A comma list sweeps an axis (template=own,instruct); "
    "grid=paper60 selects a grid and grid.<axis>=a,b changes one of its axes. Options: "
    "docs/config.md."
)


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help=OVERRIDES_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reprogrid",
        description="Grid-search orchestrator for reproducing code-LLM benchmark results.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("run", help="run every setting of a grid that the store does not hold")
    _add_overrides(p)
    p.add_argument("--retry-failed", action="store_true", help="also re-run failed settings")
    p.add_argument(
        "--wait-lock", type=float, default=0.0, metavar="SECONDS",
        help="wait this long for another run on the same store to finish (default: exit)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")

    p = sub.add_parser("plan", help="dry run: what is done, what will run, what is skipped")
    _add_overrides(p)
    p.add_argument("--retry-failed", action="store_true", help="plan failed settings to re-run")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")

    p = sub.add_parser("status", help="settings complete/running/failed/skipped/pending")
    p.add_argument("--store", default=None, help="store folder or URI (default: ./results)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("--run", default=None, help="a run id (default: the latest run)")

    p = sub.add_parser("prompts", help="render the exact prompts a setting sends")
    p.add_argument(
        "--variant", default=None,
        help="the benchmark's variant (default: its configured one; humanevalfix: tests | docs)",
    )  # fmt: skip
    p.add_argument("--template", required=True, help="a harness template, own or chat")
    p.add_argument(
        "--model", default=None,
        help="model config name, local folder or HF id: adds n_prompt_tokens (its tokenizer); "
        "needed for template own and chat",
    )  # fmt: skip
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

    p = sub.add_parser("doctor", help="what this machine can run: backends, sandbox, toolchains")
    p.add_argument("--json", action="store_true")
    for module in EXTENSIONS:
        module.register(sub)
    return parser


# ---------------------------------------------------------------------------------------------


def cmd_run(args) -> int:
    from orchestrator.report.scores import score_table
    from orchestrator.run.config import load_run_config
    from orchestrator.run.runner import prepare, run_grid

    config = load_run_config(args.overrides)
    prepared = prepare(config)
    outcome = run_grid(
        prepared, retry_failed=args.retry_failed, wait_lock_s=args.wait_lock, command="run"
    )
    table = score_table(config.store, [c.key for c in prepared.cells])
    if args.json:
        _out(json.dumps({
            "run_id": outcome.run_id, "store": config.store, "generated": outcome.generated,
            "executed": outcome.executed, "failed": outcome.failed,
            "engine_loads": outcome.engine_loads, "settings": table,
        }, indent=2, default=str))  # fmt: skip
    else:
        from orchestrator.report.scores import render_score_table

        _out(render_score_table(table))
        _out(
            f"\nrun {outcome.run_id}: generated {outcome.generated}, executed "
            f"{outcome.executed}, failed {outcome.failed}, engine loads {outcome.engine_loads}"
        )
        hint = (
            f"  (pandas.read_parquet('{config.store}/scores'))" if "://" not in config.store else ""
        )
        _out(f"store: {config.store}{hint}")
    return 1 if outcome.failed else 0


def cmd_plan(args) -> int:
    from orchestrator.report.planview import render_plan
    from orchestrator.run.config import load_run_config
    from orchestrator.run.estimate import plan_json
    from orchestrator.run.runner import make_plan, prepare
    from storage.store import Store

    config = load_run_config(args.overrides)
    prepared = prepare(config)
    plan = make_plan(Store(config.store), prepared, retry_failed=args.retry_failed)
    data = plan_json(plan, prepared, Store(config.store))
    _out(json.dumps(data, indent=2) if args.json else render_plan(data))
    return 0


def cmd_status(args) -> int:
    from orchestrator.report.status import render_status, store_status
    from storage.store import Store

    store = Store(args.store or "results")
    data = store_status(store, run_id=args.run)
    _out(json.dumps(data, indent=2, default=str) if args.json else render_status(data))
    return 0


def cmd_prompts(args) -> int:
    from orchestrator.tools.prompts import render_prompts

    records = render_prompts(args.overrides, args.variant, args.template, args.model, args.limit)
    for record in records:
        if args.format == "jsonl":
            row = {"task_id": record.task_id, "prompt": record.prompt}
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
    return 0


def cmd_doctor(args) -> int:
    from orchestrator.tools.doctor import doctor_report, render_doctor

    data = doctor_report()
    _out(json.dumps(data, indent=2) if args.json else render_doctor(data))
    return 0


COMMANDS = {
    "run": cmd_run,
    "plan": cmd_plan,
    "status": cmd_status,
    "prompts": cmd_prompts,
    "check-references": cmd_check_references,
    "tiny-model": cmd_tiny_model,
    "doctor": cmd_doctor,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    commands = dict(COMMANDS)
    for module in EXTENSIONS:
        commands.update(module.COMMANDS)
    try:
        return commands[args.command](args)
    except (ConfigError, StoreError, ClusterError, ValueError, FileNotFoundError) as e:
        sys.stderr.write(f"reprogrid {args.command}: error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(
            f"reprogrid {args.command}: interrupted; re-run the same command to resume\n"
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
