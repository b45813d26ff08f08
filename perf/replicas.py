"""Engine replicas on CPU: R=2 replicas x 1 torch thread against R=1 replica x 2 threads (and,
with --sampled, x 1 thread).

The variants are the real `run_grid` of the same grid (the tiny model, transformers, fp32,
greedy, templates instruct and yi, the first --limit HumanEvalFix problems), each on a fresh
temporary store and a fresh private Ray instance of --num-cpus CPUs (Ray's start is not
timed). Threads per engine are `cluster.engine_cpus`: Ray sets an actor's OMP_NUM_THREADS to
its CPUs, and torch sizes its thread pool from that; a probe actor with the same CPUs reports
what torch sees, so the table shows the threads the engines really had. Chunks are a fixed
--chunk samples (`checkpoint.every_samples`) so that the two replicas split the work evenly
to the end; by time (the default), the chunk after the first could hand one replica every
problem left while the other waits.

The variants alternate --repeats times (A B, B A, ...) so that load from other jobs on the
machine hits both alike; each row is a variant's median. wall_s is the whole `run_grid`
(engine loads, generation, executions, store writes), gen_s the span from the first chunk's
start to the last chunk's end. The programs of the variants must be identical.

--sampled makes the two settings sampled (t0.8) under the harness's seeding: each is one
sequential random stream whose chunks go round the idle replicas, each restoring the stream
state the chunk before it saved (run/execute/chunks.py), so two replicas run the two settings
at once; one replica of one thread is the baseline beside one of two threads.

    python perf/replicas.py                       # 2 cores: R=2 x 1 thread vs R=1 x 2 threads
    python perf/replicas.py --limit 40 --repeats 3
    python perf/replicas.py --sampled             # two harness-seeded sampled settings

Data from REPROGRID_DATA_DIR; the tiny model is built on first use in REPROGRID_CACHE_DIR.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

COLUMNS = ["setting_key", "task_id", "sample_index", "program"]


@dataclass(frozen=True)
class Variant:
    name: str
    replicas: int
    engine_cpus: int


@dataclass(frozen=True)
class Measured:
    wall_s: float
    gen_s: float
    samples: int
    threads: int  # torch threads in an actor of the variant's engine CPUs
    programs: dict  # (setting_key, task_id, sample_index) -> program


class ThreadProbe:
    """A stand-in for an engine actor: what torch sees as its thread count."""

    def threads(self) -> int:
        import torch

        return torch.get_num_threads()


def probe_threads(engine_cpus: int) -> int:
    """torch's thread count in a Ray actor that reserves `engine_cpus` CPUs, as an engine
    actor does (`Dispatcher._start_units`)."""
    import ray

    actor = ray.remote(ThreadProbe).options(num_cpus=engine_cpus).remote()
    threads = ray.get(actor.threads.remote())
    ray.kill(actor)
    return threads


def run_variant(variant: Variant, args, work: Path) -> Measured:
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.execute.raycluster import start_ray, stop_ray
    from orchestrator.run.execute.runner import run_grid
    from orchestrator.run.prepare.prepared import prepare
    from storage.store import Store

    store = work / f"store-r{variant.replicas}-t{variant.engine_cpus}"
    shutil.rmtree(store, ignore_errors=True)
    overrides = [
        "model=tiny",
        "backend=hf",
        "dtype=fp32",
        "decoding=t0.8" if args.sampled else "decoding=greedy",
        "template=instruct,yi",
        f"benchmark.limit={args.limit}",
        f"checkpoint.every_samples={args.chunk}",
        f"cluster.num_cpus={args.num_cpus}",
        f"cluster.replicas={variant.replicas}",
        f"cluster.engine_cpus={variant.engine_cpus}",
        f"store={store}",
    ]
    prepared = prepare(load_run_config(overrides))
    start_ray(prepared.config.cluster)  # the local instance run_grid would start itself
    try:
        threads = probe_threads(variant.engine_cpus)
        with open(os.devnull, "w") as quiet:
            started = time.perf_counter()
            outcome = run_grid(prepared, stream=quiet)
            wall = time.perf_counter() - started
    finally:
        stop_ray()
    if outcome.failed or not outcome.grid.done:
        raise RuntimeError(f"{variant.name}: the grid did not complete ({outcome.grid.summary()})")
    settings = Store(str(store)).read_table("settings").to_pandas()
    gen_s = (
        settings.generation_finished_at.max() - settings.generation_started_at.min()
    ).total_seconds()
    frame = Store(str(store)).read_table("generations").select(COLUMNS).to_pandas()
    programs = {(r.setting_key, r.task_id, r.sample_index): r.program for r in frame.itertuples()}
    return Measured(wall, gen_s, len(frame), threads, programs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument("--limit", type=int, default=30, help="problems per setting (default 30)")
    parser.add_argument("--chunk", type=int, default=2, help="samples per chunk (default 2)")
    parser.add_argument("--num-cpus", type=int, default=2, help="Ray CPUs (default 2)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each variant (default 2)")
    parser.add_argument(
        "--sampled", action="store_true", help="two harness-seeded sampled settings (t0.8)"
    )
    args = parser.parse_args()
    # An inherited OMP_NUM_THREADS would override the per-actor thread count Ray sets.
    os.environ.pop("OMP_NUM_THREADS", None)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    half = max(1, args.num_cpus // 2)
    variants = [
        Variant(f"R=2 x {half} thread(s)", 2, half),
        Variant(f"R=1 x {args.num_cpus} thread(s)", 1, args.num_cpus),
    ]
    if args.sampled and half != args.num_cpus:
        variants.append(Variant(f"R=1 x {half} thread(s)", 1, half))
    work = Path(tempfile.mkdtemp(prefix="reprogrid-bench-replicas-"))
    runs: dict[str, list[Measured]] = {v.name: [] for v in variants}
    try:
        for i in range(args.repeats):
            for variant in variants if i % 2 == 0 else variants[::-1]:
                runs[variant.name].append(run_variant(variant, args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    first = [runs[v.name][0].programs for v in variants]
    same = all(m.programs == first[0] for ms in runs.values() for m in ms)
    base = variants[1]
    base_rate = statistics.median(m.samples / m.wall_s for m in runs[base.name])
    base_gen = statistics.median(m.samples / m.gen_s for m in runs[base.name])
    decoding = "t0.8, seed_policy=harness" if args.sampled else "greedy"
    print(
        f"tiny model, hf, fp32, {decoding}, 2 templates x {args.limit} problems, chunks of "
        f"{args.chunk} samples, {args.num_cpus} Ray CPUs, {os.cpu_count()} cores, "
        f"median of {args.repeats} run(s) each, alternating"
    )
    print(
        f"{'variant':22s} {'torch thr':>9s} {'samples':>7s} {'wall_s':>7s} {'gen_s':>6s} "
        f"{'samples/s':>9s} {'gen samples/s':>13s} {'x wall':>7s} {'x gen':>6s}"
    )
    for v in variants:
        ms = runs[v.name]
        wall = statistics.median(m.wall_s for m in ms)
        gen = statistics.median(m.gen_s for m in ms)
        rate = statistics.median(m.samples / m.wall_s for m in ms)
        gen_rate = statistics.median(m.samples / m.gen_s for m in ms)
        print(
            f"{v.name:22s} {ms[0].threads:9d} {ms[0].samples:7d} {wall:7.1f} {gen:6.1f} "
            f"{rate:9.2f} {gen_rate:13.2f} {rate / base_rate:7.2f} "
            f"{gen_rate / base_gen:6.2f}"
        )
    for v in variants:
        walls = ", ".join(f"{m.wall_s:.1f}" for m in runs[v.name])
        print(f"  {v.name} runs, wall_s in order: {walls}")
    for other in variants[2:]:  # --sampled: one replica of one thread
        gen = [statistics.median(m.samples / m.gen_s for m in runs[v.name]) for v in variants]
        print(f"{variants[0].name} against {other.name}: generation x {gen[0] / gen[2]:.2f}")
    print(f"programs identical across variants and runs: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
