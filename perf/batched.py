"""Batched transformers (`generation.batch_size` = B) against one prompt per call, side by side.

For each model and precision: the first --limit HumanEvalFix problems under the `instruct`
template, max_length 512, greedy and t0.8 with seed_policy=per_sample (each sample from its
own seed), generated through the transformers backend at batch 1 and at batch B, each variant
in a fresh process with --threads torch threads (`EngineSession.run_settings`: prompts,
tokenization, generation, the harness's stopping rule and post-processing; the engine's load
is reported apart). The variants alternate --repeats times (1, B, B, 1, ...) so that load from
other jobs hits both alike; the fastest run of each counts. Then the programs of the two are
compared sample by sample: how many greedy and how many sampled programs differ.

    python perf/batched.py                                  # tiny + smollm2-135m, fp32 + int8
    python perf/batched.py --models tiny --limit 40 --batch 16
    python perf/batched.py --models smollm2-135m --precisions fp32 --limit 20 --repeats 2

Models are built on first use in REPROGRID_CACHE_DIR (default ~/.cache/reprogrid); data from
REPROGRID_DATA_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _unit(model: str, precision: str, limit: int, batch: int):
    """The benchmark, the engine and its settings: greedy and t0.8, per-sample seeds."""
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.plan.planner import unit_engine
    from orchestrator.run.prepare.prepared import prepare

    overrides = [
        f"model={model}",
        f"precision={precision}",
        "template=instruct",
        "max_length=512",
        "decoding=greedy,t0.8",
        "seed_policy=per_sample",
        "backend=hf",
        f"benchmark.limit={limit}",
        f"generation.batch_size={batch}",
    ]
    prepared = prepare(load_run_config(overrides))
    cells = [c for c in prepared.cells if not c.skipped]
    engine = unit_engine(cells[0].setting.engine, [c.setting for c in cells])
    return prepared.benchmark, engine, [(c.key, c.setting) for c in cells]


def child(args) -> None:
    """One variant in this process; writes its measurements and programs to args.out."""
    import torch

    torch.set_num_threads(args.threads)
    from workers.session import EngineSession

    adapter, engine, items = _unit(args.models, args.precisions, args.limit, args.batch)
    session = EngineSession(engine, {adapter.name: adapter})
    walls = []
    for _ in range(args.runs):
        started = time.perf_counter()
        results = session.run_settings(items)
        walls.append(time.perf_counter() - started)
    failed = [r for r in results if not hasattr(r, "samples")]
    if failed:
        raise RuntimeError(f"settings failed: {failed}")
    decoding = {key: setting.decoding.name for key, setting in items}
    programs = {
        f"{decoding[r.setting_key]}|{s.task_id}|{s.sample_index}": s.program
        for r in results
        for s in r.samples
    }
    samples = [s for r in results for s in r.samples]
    result = {
        "load_s": session.load_s,
        "samples": len(samples),
        "tokens": sum(s.n_output_tokens or 0 for s in samples),
        "wall_s": min(walls),
        "programs": programs,
    }
    session.close()
    Path(args.out).write_text(json.dumps(result))


def run_child(model: str, precision: str, batch: int, args) -> dict:
    out = Path(tempfile.mkdtemp(prefix="reprogrid-batched-")) / f"b{batch}.json"
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--models",
        model,
        "--precisions",
        precision,
        "--batch",
        str(batch),
        "--limit",
        str(args.limit),
        "--threads",
        str(args.threads),
        "--out",
        str(out),
    ]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def measure(model: str, precision: str, args) -> dict:
    """Both variants, alternating, the fastest run of each; their programs compared."""
    runs: dict[int, list[dict]] = {1: [], args.batch: []}
    for i in range(args.repeats):
        order = (1, args.batch) if i % 2 == 0 else (args.batch, 1)
        for batch in order:
            runs[batch].append(run_child(model, precision, batch, args))
    one = min(runs[1], key=lambda r: r["wall_s"])
    many = min(runs[args.batch], key=lambda r: r["wall_s"])
    differ = {"greedy": 0, "sampled": 0}
    total = {"greedy": 0, "sampled": 0}
    for key, program in one["programs"].items():
        kind = "greedy" if key.startswith("greedy|") else "sampled"
        total[kind] += 1
        differ[kind] += many["programs"].get(key) != program
    strip = ("programs",)
    return {
        "model": model,
        "precision": precision,
        "batch_1": {k: v for k, v in one.items() if k not in strip},
        f"batch_{args.batch}": {k: v for k, v in many.items() if k not in strip},
        "differing": differ,
        "compared": total,
    }


def _table(rows: list[dict], args) -> None:
    _out(
        f"instruct, max_length 512, greedy + t0.8 (per_sample), {args.limit} problems, CPU, "
        f"{args.threads} thread(s), {os.cpu_count()} cores, fastest of {args.repeats}"
    )
    _out(
        f"{'model':14s} {'prec':5s} {'batch':>5s} {'samples':>7s} {'tokens':>7s} "
        f"{'load_s':>7s} {'wall_s':>7s} {'tok/s':>7s} {'speed-up':>8s} "
        f"{'greedy differ':>13s} {'sampled differ':>14s}"
    )
    for row in rows:
        one = row["batch_1"]
        base = one["tokens"] / one["wall_s"]
        for batch in (1, args.batch):
            m = row[f"batch_{batch}"]
            speed = m["tokens"] / m["wall_s"]
            gain = f"x{speed / base:.2f}" if batch != 1 else ""
            diff = ("", "")
            if batch != 1:
                d, n = row["differing"], row["compared"]
                diff = (f"{d['greedy']}/{n['greedy']}", f"{d['sampled']}/{n['sampled']}")
            _out(
                f"{row['model']:14s} {row['precision']:5s} {batch:5d} {m['samples']:7d} "
                f"{m['tokens']:7d} {m['load_s']:7.1f} {m['wall_s']:7.1f} {speed:7.1f} "
                f"{gain:>8s} {diff[0]:>13s} {diff[1]:>14s}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument("--models", default="tiny,smollm2-135m", help="comma list of models")
    parser.add_argument("--precisions", default="fp32,int8", help="comma list of precisions")
    parser.add_argument("--limit", type=int, default=20, help="problems per setting (20)")
    parser.add_argument("--batch", type=int, default=8, help="the batched variant's B (8)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per variant (1)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each variant (1)")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    rows = [
        measure(model, precision, args)
        for model in args.models.split(",")
        for precision in args.precisions.split(",")
    ]
    if args.json:
        _out(json.dumps(rows, indent=2))
    else:
        _table(rows, args)


if __name__ == "__main__":
    main()
