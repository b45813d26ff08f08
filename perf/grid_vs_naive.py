"""Grid orchestration vs the naive way, side by side in one run.

Ours: `run_grid` on a local Ray (one engine load per (model, backend, dtype, quant), execution
as CPU tasks overlapping generation). Naive: what running the harness once per setting does —
a fresh process per setting that imports the libraries, loads the model, generates, then
executes the programs.

    python perf/grid_vs_naive.py --limit 10            # tiny model, paper60 grid
    python perf/grid_vs_naive.py --grid engine12 --limit 20 --naive-settings 12

Data from REPROGRID_DATA_DIR; the tiny model is built on first use in REPROGRID_CACHE_DIR.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def naive_one(spec_file: str) -> None:
    """Child process: one setting, the harness way (load, generate, execute, exit)."""
    from workers.session import EngineSession

    with open(spec_file, "rb") as fh:
        key, setting, adapter, limits = pickle.load(fh)
    session = EngineSession(setting.engine, {setting.benchmark.name: adapter})
    (result,) = session.run_settings([(key, setting)])
    adapter.execute(result.samples, limits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--grid", default="paper60")
    parser.add_argument("--limit", type=int, default=10, help="problems per setting")
    parser.add_argument(
        "--naive-settings",
        type=int,
        default=None,
        help="run only the first N settings the naive way and extrapolate (default: all)",
    )
    parser.add_argument("--num-cpus", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        naive_one(args.child)
        return

    import ray

    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.execute.runner import run_grid
    from orchestrator.run.prepare.prepared import prepare

    work = Path(tempfile.mkdtemp(prefix="reprogrid-bench-"))
    overrides = [
        f"model={args.model}",
        f"grid={args.grid}",
        f"benchmark.limit={args.limit}",
        "seed_policy=per_sample",
        f"store={work / 'store'}",
    ]
    prepared = prepare(load_run_config(overrides))
    cells = [c for c in prepared.cells if not c.skipped]

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    started = time.perf_counter()
    outcome = run_grid(prepared, stream=open(os.devnull, "w"))
    ours = time.perf_counter() - started
    ray.shutdown()

    naive_cells = cells[: args.naive_settings] if args.naive_settings else cells
    started = time.perf_counter()
    for i, cell in enumerate(naive_cells):
        spec = work / f"naive-{i}.pkl"
        with open(spec, "wb") as fh:
            pickle.dump((cell.key, cell.setting, prepared.benchmark, prepared.config.limits), fh)
        subprocess.run(
            [sys.executable, __file__, "--child", str(spec)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    naive = (time.perf_counter() - started) * len(cells) / len(naive_cells)
    extrapolated = " (extrapolated)" if len(naive_cells) < len(cells) else ""

    print(
        f"grid {args.grid}, model {args.model}, {len(cells)} settings x {args.limit} problems, "
        f"{args.num_cpus} Ray CPUs, {os.cpu_count()} cores"
    )
    print(f"{'way':34s} {'wall_s':>8s} {'engine loads':>13s}")
    print(f"{'reprogrid (engine sharing, Ray)':34s} {ours:8.1f} {outcome.engine_loads:13d}")
    print(f"{'naive (process + load per setting)':34s} {naive:8.1f} {len(cells):13d}{extrapolated}")
    print(f"speed-up: x{naive / ours:.2f}")


if __name__ == "__main__":
    main()
