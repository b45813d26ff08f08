"""`run`, `plan`, `status`: a grid against a store."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import TYPE_CHECKING

from orchestrator.cli.common import add_overrides as _add_overrides
from orchestrator.cli.common import add_store, creatable_store, existing_store
from orchestrator.cli.common import out as _out

if TYPE_CHECKING:
    from orchestrator.run.execute.signals import StopRequest


def register(sub) -> None:
    """Add `run`, `plan` and `status` to the subparsers."""
    p = sub.add_parser("run", help="run every setting of a grid that the store does not hold")
    _add_overrides(p)
    p.add_argument("--retry-failed", action="store_true", help="also re-run failed settings")
    p.add_argument(
        "--wait-lock",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another run on the same store to finish (default: exit)",
    )
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")

    p = sub.add_parser(
        "plan",
        help="dry run: what is done, what will run, what is skipped",
        description="Every setting of the grid with what a run would do with it, grouped by "
        "engine, and the cost: GPU-hours on the GPU of estimate.gpu and the wall time on "
        "cluster.gpus GPUs (with cluster.replicas; a count that would shorten it is suggested), "
        "then this machine's own time, labelled as such (docs/cost.md). Exits 2 on a blocking "
        "problem: what would stop `run` (an unreachable cluster.address, weights that cannot "
        "be had, GPUs missing here), and what cannot run on the cluster the plan is sized for: "
        "an engine that needs more GPUs than it has, or whose weights exceed the named GPU's "
        "memory, each naming what would fit (more GPUs, a quantization, a larger GPU).",
    )
    _add_overrides(p)
    p.add_argument("--retry-failed", action="store_true", help="plan failed settings to re-run")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--estimate-only",
        action="store_true",
        help="a question about cost only: skip the weights check (no Hub request; said so in "
        "the output); the GPU and memory checks still block",
    )

    p = sub.add_parser(
        "status",
        help="settings complete/running/generated/partial/failed/skipped/pending per engine",
        description="Per model and engine, how many settings of the latest run's grid (and of "
        "the rest of the store) are complete, running, generated (waiting for execution), "
        "partial (some chunks stored), failed, skipped or pending. A missing store is an error.",
    )
    add_store(p)
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("--run", default=None, help="a run id (default: the latest run)")
    p.add_argument("--keys", action="store_true", help="also list every setting key and status")


def cmd_run(args) -> int:
    from orchestrator.run.execute.signals import StopRequest, recording_signals

    # SIGTERM and SIGINT are the run's from its first line: recorded, then acted on at the next
    # safe point, also while the config loads and Ray starts (docs/cluster.md, "Preemption")
    with recording_signals(StopRequest()) as stop:
        return _run(args, stop)


def _run(args, stop: StopRequest) -> int:
    from orchestrator.report.screens.scores import score_table
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.execute.runner import run_grid
    from orchestrator.run.prepare.prepared import prepare

    config = load_run_config(args.overrides)
    creatable_store(config.store)
    prepared = prepare(config)
    outcome = run_grid(
        prepared,
        retry_failed=args.retry_failed,
        wait_lock_s=args.wait_lock,
        command="run",
        stop=stop,
    )
    table = score_table(config.store, [c.key for c in prepared.cells])
    if args.json:
        _out(
            json.dumps(
                {
                    "run_id": outcome.run_id,
                    "store": config.store,
                    "generated": outcome.generated,
                    "executed": outcome.executed,
                    "failed": outcome.failed,
                    "engine_loads": outcome.engine_loads,
                    "grid": dataclasses.asdict(outcome.grid),
                    "grid_complete": outcome.grid.done,
                    "settings": table,
                },
                indent=2,
                default=str,
            )
        )
    else:
        from orchestrator.report.screens.scores import render_score_table

        _out(render_score_table(table))
        _out(
            f"\nrun {outcome.run_id}: generated {outcome.generated}, executed "
            f"{outcome.executed}, failed {outcome.failed}, engine loads {outcome.engine_loads}"
        )
        hint = (
            f"  (pandas.read_parquet('{config.store}/scores'))" if "://" not in config.store else ""
        )
        _out(f"store: {config.store}{hint}")
        _out(_next_steps(config.store, table))
    if not outcome.grid.done:
        # Exit 1 whenever the grid asked for is not complete, also when its failures are from
        # an earlier run: a script must not believe an incomplete grid is done.
        retry = " (re-run with --retry-failed to retry them)" if outcome.grid.failed else ""
        sys.stderr.write(f"reprogrid run: {outcome.grid.summary()}{retry}\n")
        return 1
    return 0


def _next_steps(store: str, table: list[dict]) -> str:
    """The commands a user runs on the store next, one `show` for a sample of this grid that
    the harness's prompt slicing cut (docs/report.md, "Decode mismatch")."""
    from orchestrator.cli.problems import default_view_out
    from orchestrator.cli.report import _default_out
    from orchestrator.report.tables.mismatch import first_cut_sample, next_commands
    from storage.store import Store

    keys = [r["setting_key"] for r in table if (r.get("n_decode_mismatch") or 0) > 0]
    cut = first_cut_sample(Store(store), keys) if keys else None
    view = str(default_view_out(store) / "index.html")
    lines = next_commands(store, _default_out(store), view, cut)
    return "\nnext:\n" + "\n".join(f"  {line}" for line in lines)


def cmd_plan(args) -> int:
    from orchestrator.report.screens.planview import render_plan
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.estimate.estimator import plan_json
    from orchestrator.run.estimate.fastpath import fast_path_json
    from orchestrator.run.plan.state import make_plan
    from orchestrator.run.preflight.checks import preflight
    from orchestrator.run.prepare.prepared import prepare
    from storage.store import Store

    config = load_run_config(args.overrides)
    creatable_store(config.store)
    prepared = prepare(config)
    store = Store(config.store)
    plan = make_plan(store, prepared, retry_failed=args.retry_failed)
    report = preflight(prepared, plan, weights=not args.estimate_only)
    data = plan_json(plan, prepared, store, report)
    data["fast_path"] = fast_path_json(args.overrides, {i.key for i in plan.settings})
    _out(json.dumps(data, indent=2) if args.json else render_plan(data))
    # The plan's problems: preflight's and what cannot run on the cluster it is sized for.
    blocking = [p for p in data["preflight"]["problems"] if p["severity"] == "blocking"]
    if blocking:
        # Exit 2 as for a bad config: `run` would fail before generating anything.
        lines = "\n".join(f"  {p['kind']}: {p['message']}" for p in blocking)
        sys.stderr.write(f"reprogrid plan: {len(blocking)} blocking problem(s):\n{lines}\n")
        return 2
    return 0


def cmd_status(args) -> int:
    from orchestrator.report.screens.status import render_status, store_status
    from storage.store import Store

    store = Store(existing_store(args.store))
    data = store_status(store, run_id=args.run)
    _out(
        json.dumps(data, indent=2, default=str)
        if args.json
        else render_status(data, keys=args.keys)
    )
    return 0


COMMANDS = {"run": cmd_run, "plan": cmd_plan, "status": cmd_status}
