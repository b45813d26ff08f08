"""Simulated cluster: the real driver on a local Ray that advertises --gpus fake GPUs, against
the plan's wall time for the same grid on that many H200s.

The grid: --models models x paper60 (60 settings each, 5 engine units: one per precision) x
the first --limit problems. The models are the paper's 11 (sizes, families, templates; taken in
turn), renamed sim-000...; each is a fake model (`backend=fake`) whose engine sleeps, per
request, the cost model's time of that model and precision, scaled by one factor chosen so
that the plan's wall time is --target-s seconds. The script:

1. plans the grid as transformers engines on --gpus H200s (`cluster.gpus`, `estimate.gpu=h200`,
   `cluster.replicas`; the plan of `reprogrid plan`, through the library), and takes from it
   each engine's load and generation time and the grid's wall time (makespan);
2. writes the fake models with those times x scale (`fake://load=...,delay-bf16=...,jitter=...`,
   workers/backends/fake.py) into a copy of sweeps/ (REPROGRID_SWEEPS_DIR);
3. runs `reprogrid run` of the same grid with `backend=fake` on a fresh store in a session of
   its own, with `cluster.num_gpus=--gpus` (Ray only counts GPUs: a CPU machine can advertise
   64) and `cluster.num_cpus=--num-cpus`;
4. meanwhile samples the driver process's CPU time and RSS (/proc) and the RSS of every process
   of the run's session (Ray and its workers) each second, counts the finished settings (score
   shards), and runs `reprogrid status` every --status-every seconds, timing it;
5. reads the store: the makespan is from the first settings row the driver writes (the
   dispatcher starting the units, after Ray's start) to the last generation; the lower bound is
   max(the units' measured work / GPUs, the longest unit), a unit lasting from its load to its
   last chunk; the same rule replayed on the measured unit times shows what is the rule's and
   what is the driver's.

    python perf/cluster_sim.py                                     # 100 models, 64 GPUs
    python perf/cluster_sim.py --models 4 --gpus 8 --target-s 60   # a short one
    python perf/cluster_sim.py --models 4 --gpus 4 --override decoding=greedy   # fewer settings

Data from REPROGRID_DATA_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PRECISIONS = ("bf16", "fp16", "fp32", "int8", "int4")
TICK_S = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def paper_models() -> list[dict]:
    """The model configs of experiment=paper-table2, in its order."""
    experiment = yaml.safe_load((ROOT / "sweeps/experiment/paper-table2.yaml").read_text())
    names = experiment["grid"]["model"]
    return [yaml.safe_load((ROOT / f"sweeps/model/{n}.yaml").read_text()) for n in names]


def sim_models(n: int) -> list[dict]:
    base = paper_models()
    out = []
    for i in range(n):
        model = dict(base[i % len(base)])
        model.update(name=f"sim-{i:03d}", repo_id=f"fake://sim-{i:03d}", revision="sim")
        out.append(model)
    return out


def write_models(sweeps: Path, models: list[dict]) -> None:
    for model in models:
        (sweeps / "model" / f"{model['name']}.yaml").write_text(yaml.safe_dump(model))


def grid(args, models: list[dict]) -> list[str]:
    return [
        "grid=paper60",
        "model=" + ",".join(m["name"] for m in models),
        f"benchmark.limit={args.limit}",
        f"cluster.replicas={args.replicas}",
        *args.override,
    ]


def plan_hf(args, models: list[dict], store: Path) -> dict:
    """The plan of the grid as transformers engines on --gpus H200s (no Ray, no GPU)."""
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.estimate.estimator import plan_json
    from orchestrator.run.plan.state import make_plan
    from orchestrator.run.prepare.prepared import prepare
    from storage.store import Store

    overrides = [
        *grid(args, models),
        "backend=hf",
        "estimate.gpu=h200",
        f"cluster.gpus={args.gpus}",
        "cluster.num_gpus=0",
        f"store={store}",
    ]
    prepared = prepare(load_run_config(overrides))
    return plan_json(make_plan(Store(str(store)), prepared), prepared, Store(str(store)))


def precision(engine: dict) -> str:
    return engine["quant"] if engine["quant"] != "none" else engine["dtype"]


def knobs(plan: dict, scale: float, jitter: float) -> dict[str, str]:
    """Each model's fake repo id: its engines' load and per-request time on the GPU (one
    replica) x scale. The name keeps two models of one size apart (the key has the repo id)."""
    parts: dict[str, list[str]] = {}
    for e in plan["engines"]:
        requests = sum(s["total_samples"] / s["n_samples"] for s in e["settings"])
        generate = e["sequential_s"] + e["parallel_s"]
        load = f"load={scale * e['cluster_load_s']:.4f}"
        own = parts.setdefault(e["model"], [f"sim={e['model']}", load])
        own.append(f"delay-{precision(e)}={scale * generate / requests:.5f}")
    return {m: "fake://" + ",".join([*p, f"jitter={jitter:g}"]) for m, p in parts.items()}


@dataclass
class Samples:
    t0: float | None = None  # the first settings row: the dispatcher starts the units
    times: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)  # the driver's user + system CPU
    rss_mb: list[float] = field(default_factory=list)  # the driver's
    session_mb: list[float] = field(default_factory=list)  # every process of the run
    session_cpu_s: list[float] = field(default_factory=list)  # theirs, cumulative
    machine_cpu_s: list[float] = field(default_factory=list)  # every process here (/proc/stat)
    finished: list[int] = field(default_factory=list)  # settings executed (score shards)
    status_s: list[float] = field(default_factory=list)  # `reprogrid status` latencies
    status_failed: int = 0


def proc_stat(pid: int) -> tuple[int, float, float] | None:
    """(session id, CPU seconds, RSS MB) of a live process, None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp session ...
    cpu = (int(fields[11]) + int(fields[12])) / TICK_S
    return int(fields[3]), cpu, int(fields[21]) * PAGE / 1e6


class Session:
    """The processes of the run's session: RSS now, CPU since the run began (each process's
    CPU as last seen, so a process that ends keeps what it had used a second before)."""

    def __init__(self, sid: int):
        self.sid = sid
        self.cpu: dict[int, float] = {}

    def sample(self) -> tuple[float, float]:
        rss = 0.0
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (got := proc_stat(int(entry.name))) and got[0] == self.sid:
                self.cpu[int(entry.name)] = got[1]
                rss += got[2]
        return sum(self.cpu.values()), rss


def machine_cpu_s() -> float:
    """CPU seconds every core of this machine has been busy (not idle or waiting)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICK_S


def shards(store: Path, table: str) -> int:
    folder = store / table
    return sum(1 for _ in folder.glob("*.parquet")) if folder.is_dir() else 0


def poll_status(store: Path, env: dict, samples: Samples, every_s: float, done) -> None:
    """`reprogrid status` every `every_s` seconds while the run goes on, timed."""
    while not done.wait(every_s):
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "status", "--store", str(store), "--json"],
            env=env,
            capture_output=True,
            cwd=ROOT,
        )
        samples.status_s.append(time.perf_counter() - started)
        samples.status_failed += out.returncode != 0


def run_driver(args, models, store: Path, env: dict, log: Path) -> Samples:
    overrides = [
        *grid(args, models),
        "backend=fake",
        f"cluster.num_gpus={args.gpus}",
        f"cluster.num_cpus={args.num_cpus}",
        "cluster.engine_cpus=1",
        "cluster.cpu_if_no_gpus=false",
        # Two execution tasks at a time, one sandbox slot each: on a 2-core machine the sandbox's
        # fork servers (two per task by default) would take the CPU the engines' processes
        # need to start. Executions then finish after the generation, which the makespan
        # measures; the plan does not estimate them (docs/cost.md).
        "cluster.max_pending_exec=2",
        "execution.workers=1",
        f"store={store}",
    ]
    cmd = [sys.executable, "-m", "orchestrator.cli", "run", *overrides]
    samples, done = Samples(), threading.Event()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT
        )
    poller = threading.Thread(
        target=poll_status, args=(store, env, samples, args.status_every, done), daemon=True
    )
    poller.start()
    session = Session(proc.pid)
    while proc.poll() is None:
        if samples.t0 is None and shards(store, "settings"):
            samples.t0 = time.time()
        got = proc_stat(proc.pid)
        if got is not None and samples.t0 is not None:
            samples.times.append(time.time())
            samples.cpu_s.append(got[1])
            samples.rss_mb.append(got[2])
            cpu, rss = session.sample()
            samples.session_cpu_s.append(cpu)
            samples.session_mb.append(rss)
            samples.machine_cpu_s.append(machine_cpu_s())
            samples.finished.append(shards(store, "scores"))
        time.sleep(0.2 if samples.t0 is None else 1.0)
    done.set()
    poller.join()
    if proc.returncode != 0:
        raise SystemExit(f"the run failed ({proc.returncode}); its output: {log}")
    return samples


@dataclass(frozen=True)
class Unit:
    key: str
    gpu: str  # the fake GPU Ray gave it
    spawned: float  # its engine's process started (epoch seconds)
    load_start: float
    load_s: float
    generation_s: float  # the sum of its chunks' generation times
    first_chunk: float  # its first chunk began
    end: float  # its last chunk came back

    @property
    def round_trips(self) -> float:
        """Between its chunks: the driver's commit and the next chunk's hand-over."""
        return self.end - self.first_chunk - self.generation_s

    @property
    def seconds(self) -> float:
        """How long it held its GPU at least: from its process's start to its last chunk."""
        return self.end - self.spawned


def measured_units(store: Path, order: dict[tuple[str, str], int]) -> list[Unit]:
    """Each engine unit from the store, in the order the dispatcher started them (`order`:
    (model, precision) -> the plan's unit_index)."""
    from storage.store import Store

    frame = Store(str(store)).read_table("settings").to_pandas()
    units = []
    for key, rows in frame.groupby("engine_key"):
        options = json.loads(rows.engine_options_json.iloc[0])
        index = order[(rows.model_name.iloc[0], rows.precision.iloc[0])]
        unit = Unit(
            key,
            options["cuda_visible_devices"],
            float(options["process_started_at"]),
            float(options["load_started_at"]),
            float(rows.engine_load_s.max()),
            float(rows.generation_s.sum()),
            rows.generation_started_at.min().timestamp(),
            rows.generation_finished_at.max().timestamp(),
        )
        units.append((index, unit))
    return [u for _, u in sorted(units, key=lambda iu: iu[0])]


def overheads(units: list[Unit]) -> str:
    """Medians of what a unit spends beyond its load and generation: Ray placing it and
    starting its process after the GPU's previous unit, the process's start up to the load,
    and the gaps between its chunks (the driver's round trips)."""
    by_gpu: dict[str, list[Unit]] = {}
    for u in units:
        by_gpu.setdefault(u.gpu, []).append(u)
    spawn = []
    for same in by_gpu.values():
        same.sort(key=lambda u: u.spawned)
        spawn += [b.spawned - a.end for a, b in zip(same, same[1:], strict=False)]
    startup = [u.load_start - u.spawned for u in units]
    chunks = [u.round_trips for u in units]
    return (
        f"GPU free -> next engine process {statistics.median(spawn):.1f} s, process -> load "
        f"{statistics.median(startup):.1f} s, chunk round trips {statistics.median(chunks):.1f} s "
        "per unit"
    )


def driver_memory(samples: Samples) -> str:
    """RSS at a quarter, half and all of the finished settings, and the slope between. (The
    count is of score files: the end of the run packs them into a few, so its maximum is the
    number of settings.)"""
    total = max(samples.finished, default=0)
    points = []
    for part in (0.25, 0.5, 1.0):
        i = next((i for i, n in enumerate(samples.finished) if n >= part * total), None)
        if i is not None:
            points.append((samples.finished[i], samples.rss_mb[i]))
    shown = ", ".join(f"{mb:.0f} MB at {n}" for n, mb in points)
    if len(points) >= 2 and points[-1][0] > points[0][0]:
        slope = (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0]) * 1000
        shown += f" (slope {slope:+.1f} MB per 1000 settings)"
    return shown


def cpu_line(samples: Samples) -> str:
    span = samples.times[-1] - samples.times[0]
    used = samples.cpu_s[-1] - samples.cpu_s[0]
    busiest = 0.0
    for i in range(10, len(samples.times)):  # the busiest 10 s window
        window = samples.times[i] - samples.times[i - 10]
        busiest = max(busiest, (samples.cpu_s[i] - samples.cpu_s[i - 10]) / window)
    run = samples.session_cpu_s[-1] - samples.session_cpu_s[0]
    machine = samples.machine_cpu_s[-1] - samples.machine_cpu_s[0]
    return (
        f"{used:.0f} CPU-s over {span:.0f} s = {used / span:.2f} core(s) on average, "
        f"{busiest:.2f} in the busiest 10 s; the whole run (Ray, engines, executions) "
        f"{run / span:.2f} cores, the machine {machine / span:.2f} of {os.cpu_count()}"
    )


def results(args, plan: dict, scale: float, samples: Samples, units: list[Unit]) -> dict:
    """The figures the table prints (and --json writes)."""
    from orchestrator.analysis.schedule import UnitJob, lower_bound, schedule_units

    cluster = plan["cluster"]
    assert samples.t0 is not None, "the driver wrote no settings row"
    jobs = [UnitJob(u.key, 1, u.seconds) for u in units]
    # The plan's units with what the simulation does not scale down added to each: its
    # engine process's start and its chunks' round trips (medians as measured)
    fixed = statistics.median(u.load_start - u.spawned + u.round_trips for u in units)
    planned = sorted(plan["engines"], key=lambda e: e["unit_index"])
    with_fixed = [UnitJob(e["engine_key"], 1, e["cluster_s"] * scale + fixed) for e in planned]
    return {
        "plan_with_fixed_s": schedule_units(with_fixed, args.gpus).makespan_s,
        "fixed_s": fixed,
        "makespan_s": max(u.end for u in units) - samples.t0,
        "lower_bound_s": lower_bound(jobs, args.gpus),
        "replayed_s": schedule_units(jobs, args.gpus).makespan_s,
        "predicted_s": cluster["makespan_s"] * scale,
        "plan_lower_bound_s": cluster["lower_bound_s"] * scale,
        "scale": scale,
        "units": [{"spawned": u.spawned - samples.t0, "end": u.end - samples.t0} for u in units],
        "samples": samples.__dict__,
    }


def report(args, plan: dict, scale: float, samples: Samples, units: list[Unit], wall: float):
    cluster = plan["cluster"]
    got = results(args, plan, scale, samples, units)
    predicted, bound = got["predicted_s"], got["lower_bound_s"]
    n_settings = sum(len(e["settings"]) for e in plan["engines"])
    print(
        f"{args.models} models x paper60 = {n_settings} settings, {len(units)} engine units, "
        f"{args.limit} problems each; {args.gpus} fake GPUs (Ray num_gpus), {args.num_cpus} Ray "
        f"CPUs, {os.cpu_count()} cores; cluster.replicas={args.replicas}; fake engines at "
        f"{scale:.5f} x the cost model's H200 times"
    )
    print(f"{'':44s} {'s':>8s} {'/ bound':>8s} {'/ plan':>8s}")
    rows = [
        ("lower bound: max(work / GPUs, longest unit)", bound),
        ("makespan, measured", got["makespan_s"]),
        ("the rule replayed on the measured units", got["replayed_s"]),
        ("plan: makespan x scale", predicted),
        ("plan: lower bound x scale", got["plan_lower_bound_s"]),
        (f"plan x scale + {got['fixed_s']:.1f} s per unit not scaled", got["plan_with_fixed_s"]),
    ]
    for name, value in rows:
        print(f"{name:44s} {value:8.1f} {value / bound:8.3f} {value / predicted:8.3f}")
    longest = max(u.seconds for u in units)
    work = sum(u.seconds for u in units)
    print(
        f"measured work {work:.0f} unit-s ({work / args.gpus:.1f} s per GPU), longest unit "
        f"{longest:.1f} s; plan: {cluster['gpu_hours']:.1f} GPU-hours, wall "
        f"{cluster['makespan_s'] / 3600:.2f} h on {args.gpus} H200s"
    )
    print(f"per unit, median: {overheads(units)}")
    print(f"driver CPU: {cpu_line(samples)}")
    print(f"driver RSS against finished settings: {driver_memory(samples)}")
    print(
        f"driver RSS: max {max(samples.rss_mb):.0f} MB; the run's processes: max "
        f"{max(samples.session_mb) / 1000:.1f} GB"
    )
    lat = samples.status_s
    if lat:
        median = statistics.median(lat)
        print(
            f"`reprogrid status` during the run: {len(lat)} calls, median {median:.1f} s, max "
            f"{max(lat):.1f} s, {samples.status_failed} failed"
        )
    print(f"whole run (Ray start, units, the last executions): {wall:.0f} s")
    return got


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument("--models", type=int, default=100, help="models (default 100)")
    parser.add_argument("--gpus", type=int, default=64, help="fake GPUs (default 64)")
    parser.add_argument("--limit", type=int, default=4, help="problems per setting (default 4)")
    parser.add_argument("--replicas", type=int, default=1, help="cluster.replicas (default 1)")
    parser.add_argument(
        "--target-s", type=float, default=1800.0, help="the plan's scaled wall time (1800)"
    )
    parser.add_argument("--num-cpus", type=int, default=None, help="Ray CPUs (default GPUs + 8)")
    parser.add_argument("--jitter", type=float, default=0.5, help="per-request jitter (0.5)")
    parser.add_argument(
        "--status-every", type=float, default=120.0, help="seconds between status calls (120)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the store, sweeps and log")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        help="a grid override for both the plan and the run (repeatable), e.g. decoding=greedy",
    )
    args = parser.parse_args()
    args.num_cpus = args.num_cpus or args.gpus + 8
    sys.path.insert(0, str(ROOT))
    work = Path(tempfile.mkdtemp(prefix="reprogrid-bench-cluster-"))
    sweeps = work / "sweeps"
    shutil.copytree(ROOT / "sweeps", sweeps)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REPROGRID_SWEEPS_DIR": str(sweeps)}
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.update(env)
    try:
        models = sim_models(args.models)
        write_models(sweeps, models)
        plan = plan_hf(args, models, work / "plan-store")
        scale = args.target_s / plan["cluster"]["makespan_s"]
        for model, repo_id in knobs(plan, scale, args.jitter).items():
            next(m for m in models if m["name"] == model)["repo_id"] = repo_id
        write_models(sweeps, models)
        started = time.monotonic()
        samples = run_driver(args, models, work / "store", env, work / "run.log")
        wall = time.monotonic() - started
        order = {(e["model"], precision(e)): e["unit_index"] for e in plan["engines"]}
        got = report(args, plan, scale, samples, measured_units(work / "store", order), wall)
        if args.json:
            args.json.write_text(json.dumps(got))
    finally:
        if args.keep:
            print(f"store, sweeps and log kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
