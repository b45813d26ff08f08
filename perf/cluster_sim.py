"""Simulated cluster: the real driver on a local Ray that advertises --gpus fake GPUs, against
the plan's wall time for the same grid on that many H200s.

The grid: --models models x paper60 (60 settings each, 5 engine units: one per precision) x
the first --limit problems. The models are the paper's 11 (sizes, families, templates; taken in
turn; the default 11 is `experiment=paper-table2`'s shape: 660 settings, 55 units), renamed
sim-000...; each is a fake model (`backend=fake`) whose engine sleeps, per request, the cost
model's time of that model and precision for one stream of a full engine instance, scaled by
one factor chosen so that the plan's wall time is --target-s seconds. Time is scaled, nothing
else: Ray's start of an engine process, the driver's chunk round trips and its commits take
what they take on this machine (2 cores for Ray, the driver and up to --gpus engine
processes), so they weigh far more against the scaled units than against real ones of hours.
The script:

1. plans the grid as transformers engines on --gpus H200s (`cluster.gpus`, `estimate.gpu=h200`,
   `cluster.replicas`; the plan of `reprogrid plan`, through the library), and takes from it
   each engine's load and generation time and the grid's wall time (makespan);
2. writes the fake models with those times x scale (`fake://load=...,delay-bf16=...,jitter=...`,
   workers/backends/fake.py) into a copy of sweeps/ (REPROGRID_SWEEPS_DIR);
3. runs `reprogrid run` of the same grid with `backend=fake` on a fresh store in a session of
   its own, with `cluster.num_gpus=--gpus` (Ray only counts GPUs: a CPU machine can advertise
   64), `cluster.num_cpus=--num-cpus` and a problem per chunk (`checkpoint.every_samples=1`,
   as real chunks of a minute are small against a setting of an hour);
4. meanwhile samples the driver process's CPU time and RSS (/proc) and the RSS of every process
   of the run's session (Ray and its workers) each second, the life of every engine process
   (found by a marker in its environment), counts the finished settings (score shards), and
   runs `reprogrid status` every --status-every seconds, timing it;
5. reads the store: the makespan is from the first settings row the driver writes (the
   dispatcher starting the units, after Ray's start) to the last generation; the engine
   processes' lives are the GPU time the run held (one GPU per process at cluster.replicas=1);
   the plan's schedule replayed with each instance's unscaled start (process start to load,
   measured) added shows what of the difference is that start.

With cluster.replicas above 1 the plan caps each unit's replicas by the H200's memory while
the fake GPUs have none to cap by: compare at cluster.replicas=1, or where every unit fits.

    python perf/cluster_sim.py --gpus 8                            # paper-table2, 8 GPUs
    python perf/cluster_sim.py --gpus 64                           # paper-table2, 64 GPUs
    python perf/cluster_sim.py --models 4 --gpus 8 --target-s 60   # a short one

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
    """Each model's fake repo id: its engines' load and per-request time x scale, for one
    stream of a full instance (one stream alone over the replicas' speed each when all
    decode). The name keeps two models of one size apart (the key has the repo id)."""
    parts: dict[str, list[str]] = {}
    for e in plan["engines"]:
        requests = sum(s["total_samples"] / s["n_samples"] for s in e["settings"])
        generate = e["sequential_s"] + e["parallel_s"]
        speed = e["replica_gain"] / e["replicas_running"]
        load = f"load={scale * e['cluster_load_s']:.4f}"
        own = parts.setdefault(e["model"], [f"sim={e['model']}", load])
        own.append(f"delay-{precision(e)}={scale * generate / requests / speed:.5f}")
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
    engines: dict[int, list[float]] = field(default_factory=dict)  # pid -> [first, last seen]


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


MARKER = "REPROGRID_SIM_RUN"  # in the environment of every process the simulated run starts


def engine_processes(marker: str) -> list[int]:
    """The run's engine actor processes (Ray's EngineWorker, with the run's marker)."""
    found = []
    needle = f"{MARKER}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"EngineWorker" not in (entry / "cmdline").read_bytes():
                continue
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


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
        "checkpoint.every_samples=1",
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
            for pid in engine_processes(env[MARKER]):
                samples.engines.setdefault(pid, [samples.times[-1]] * 2)[1] = samples.times[-1]
        time.sleep(0.2 if samples.t0 is None else 1.0)
    done.set()
    poller.join()
    if proc.returncode != 0:
        raise SystemExit(f"the run failed ({proc.returncode}); its output: {log}")
    return samples


def instance_start_s(store: Path) -> float:
    """The median unscaled start of an engine instance: its process's start to its load
    (Ray starting a worker, imports), from the fake engines' options in the settings rows."""
    from storage.store import Store

    frame = Store(str(store)).read_table("settings").to_pandas()
    starts = []
    for text in frame.engine_options_json.dropna():
        options = json.loads(text)
        if options.get("process_started_at"):
            starts.append(float(options["load_started_at"]) - float(options["process_started_at"]))
    return statistics.median(starts) if starts else 0.0


def measured_end(store: Path) -> float:
    """When the last chunk came back (epoch seconds)."""
    from storage.store import Store

    frame = Store(str(store)).read_table("settings").to_pandas()
    return frame.generation_finished_at.max().timestamp()


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


def replayed(plan: dict, scale: float, gpus: int, extra_s: float, work=None):
    """The plan's schedule again, its times x scale, each instance's load `extra_s` longer;
    with `work` (done_work), each unit's chains and shared work as the engines did them."""
    from orchestrator.analysis.schedule import UnitPlan, replay

    def unit(e: dict) -> UnitPlan:
        chains = tuple(c * scale for c in e["chains_s"])
        shared = e["parallel_s"] * scale
        if work is not None:
            chains, shared = work[(e["model"], precision(e))]
        load = e["cluster_load_s"] * scale + extra_s
        return UnitPlan(
            e["engine_key"],
            e["num_gpus"],
            e["replicas_running"],
            e["replica_gain"],
            load,
            chains,
            shared,
        )

    return replay([unit(e) for e in sorted(plan["engines"], key=lambda e: e["unit_index"])], gpus)


def done_work(store: Path) -> dict[tuple[str, str], tuple[tuple[float, ...], float]]:
    """Each unit's work as its fake engines did it, by (model, precision): (each chain's
    generation seconds, the other settings' together), from the settings rows. The engines
    sleep the plan's time of one request times a jitter factor drawn from the prompt, so a
    setting of 4 problems does not take the plan's mean; and the `instruct` template's prompts
    are the same for every model, so its factors are too."""
    from storage.store import Store

    frame = Store(str(store)).read_table("settings").to_pandas()
    frame = frame[frame.status == "complete"]
    work: dict[tuple[str, str], tuple[list[float], float]] = {}
    for row in frame.itertuples():
        unit = (row.model_name, row.precision)
        chains, shared = work.setdefault(unit, ([], 0.0))
        if row.seed_policy == "harness" and row.do_sample:
            chains.append(float(row.generation_s))
        else:
            work[unit] = (chains, shared + float(row.generation_s))
    return {key: (tuple(chains), shared) for key, (chains, shared) in work.items()}


def results(args, plan: dict, scale: float, samples: Samples, store: Path) -> dict:
    """The figures the table prints (and --json writes)."""
    cluster = plan["cluster"]
    assert samples.t0 is not None, "the driver wrote no settings row"
    start = instance_start_s(store)
    with_start = replayed(plan, scale, args.gpus, start)
    on_done = replayed(plan, scale, args.gpus, start, done_work(store))
    lives = [last - first for first, last in samples.engines.values()]
    return {
        "settings": sum(len(e["settings"]) for e in plan["engines"]),
        "makespan_s": measured_end(store) - samples.t0,
        "predicted_s": cluster["makespan_s"] * scale,
        "plan_lower_bound_s": cluster["lower_bound_s"] * scale,
        "plan_with_start_s": with_start.makespan_s,
        "instance_start_s": start,
        "plan_on_done_work_s": on_done.makespan_s,
        "plan_gpu_s": cluster["gpu_hours"] * 3600 * scale,
        "plan_with_start_gpu_s": with_start.gpu_seconds,
        "plan_instances": cluster["instances"],
        "engine_processes": len(lives),
        "engine_process_s": sum(lives),
        "scale": scale,
        "samples": samples.__dict__,
    }


def report(args, plan: dict, scale: float, samples: Samples, store: Path, wall: float):
    cluster = plan["cluster"]
    got = results(args, plan, scale, samples, store)
    predicted = got["predicted_s"]
    n_settings = sum(len(e["settings"]) for e in plan["engines"])
    print(
        f"{args.models} models x paper60 = {n_settings} settings, {len(plan['engines'])} engine "
        f"units, {args.limit} problems each; {args.gpus} fake GPUs (Ray num_gpus), "
        f"{args.num_cpus} Ray CPUs, {os.cpu_count()} cores; cluster.replicas={args.replicas}; "
        f"fake engines at {scale:.5f} x the cost model's H200 times"
    )
    print(f"{'':52s} {'s':>8s} {'/ plan':>8s}")
    start = f"plan x scale, + {got['instance_start_s']:.1f} s start per instance"
    rows = [
        ("plan: makespan x scale", predicted),
        ("plan: lower bound x scale", got["plan_lower_bound_s"]),
        (start, got["plan_with_start_s"]),
        ("the same on the work the engines did (jitter)", got["plan_on_done_work_s"]),
        ("makespan, measured", got["makespan_s"]),
    ]
    for name, value in rows:
        print(f"{name:52s} {value:8.1f} {value / predicted:8.3f}")
    planned_gpu = f"{got['plan_gpu_s']:.0f} GPU-s ({got['plan_with_start_gpu_s']:.0f} with starts)"
    measured_gpu = f"{got['engine_process_s']:.0f} s of {got['engine_processes']} engine processes"
    print(
        f"GPU time: plan x scale {planned_gpu} on {got['plan_instances']} instances; measured "
        f"{measured_gpu}; plan: {cluster['gpu_hours']:.1f} GPU-hours, wall "
        f"{cluster['makespan_s'] / 3600:.2f} h on {args.gpus} H200s"
    )
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
    parser.add_argument("--models", type=int, default=11, help="models (default 11)")
    parser.add_argument("--gpus", type=int, default=64, help="fake GPUs (default 64)")
    # A problem is a chunk here, and the plan's rule splits a unit's last chunks among its
    # streams as a fluid: with few problems a chunk is a large part of a setting and the tail
    # runs long against the plan (docs/cost.md), where a real sweep's chunks
    # (checkpoint.every_s) are a sliver of a setting of hours.
    parser.add_argument("--limit", type=int, default=16, help="problems per setting (default 16)")
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
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REPROGRID_SWEEPS_DIR": str(sweeps),
        MARKER: work.name,
    }
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
        got = report(args, plan, scale, samples, work / "store", wall)
        if args.json:
            args.json.write_text(json.dumps(got))
    finally:
        if args.keep:
            print(f"store, sweeps and log kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
