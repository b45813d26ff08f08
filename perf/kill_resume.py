"""Kill and resume: SIGKILL a running grid at random moments, re-run it, compare with a clean run.

The grid: the tiny model (transformers, fp32), templates instruct and yi x decodings greedy and
t0.2, `seed_policy=harness` (t0.2 then draws from the harness's one random stream, which a
resume must continue exactly), the first --limit problems, a chunk committed every --chunk
samples (`checkpoint.every_samples`), one engine replica. Each launch is `reprogrid run` in a
session of its own (`start_new_session`). Once the launch has committed a chunk of its own (so
that every launch makes progress), the script waits a random 0..--max-wait seconds (seeded by
--seed) and sends SIGKILL to the launch's process group: the driver and the raylet and GCS of
the local Ray it started. Ray's workers run in process groups of their own and exit by
themselves once their raylet is gone. The script counts the processes of the launch's session
still alive just after the kill, waits for them to go, and kills any left after 20 s itself.
After --kills kills the same command runs to the end. Then the same grid runs uninterrupted on
a second fresh store.

Checked and printed:
* every setting is complete, with 0 duplicate (task_id, sample_index) rows per setting;
* the programs equal the uninterrupted run's per (setting_key, task_id, sample_index);
* no committed chunk is ever written again (each shard's bytes at every kill against the end);
* each relaunch generates exactly the samples no committed chunk holds (its "N samples to
  generate" line against the store);
* the work each kill threw away. The one engine has one chunk in flight. The relaunch
  generates that chunk again first, so "redone" is the size of the relaunch's first committed
  chunk. "lost_s" is the generation time since the killed launch's last commit. A chunk's
  average generation time, from the uninterrupted run, is printed next to it.

    python perf/kill_resume.py                    # 10 kills, seed 0
    python perf/kill_resume.py --kills 20 --seed 3 --limit 60

Data from REPROGRID_DATA_DIR; the tiny model is built on first use in REPROGRID_CACHE_DIR.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
ENGINE_LINE = re.compile(r"engine \S+: (\d+) samples to generate on \d+ replica")
KEY = ["setting_key", "task_id", "sample_index"]
GRACE_S = 20.0  # how long a killed launch's leftover processes get to exit by themselves


def grid(args) -> list[str]:
    return [
        "model=tiny",
        "backend=hf",
        "dtype=fp32",
        "template=instruct,yi",
        "decoding=greedy,t0.2",
        "seed_policy=harness",
        f"benchmark.limit={args.limit}",
        f"max_length={args.max_length}",
        f"checkpoint.every_samples={args.chunk}",
        "cluster.num_cpus=2",
        "cluster.replicas=1",
    ]


@dataclass
class Kill:
    at_s: float  # seconds after the launch started
    committed: int  # samples in the store after the kill
    this_launch: int  # of those, committed by the killed launch
    lost_s: float  # generation seconds since the launch's last commit
    lingering: list[str]  # names of the launch's processes alive just after the kill
    left: int  # of those, still alive after GRACE_S (killed by this script)
    relaunch_generates: int | None = None  # the next launch's "N samples to generate"
    redone: int = 0  # samples of the next launch's first committed chunk
    redone_chunk: str | None = None  # its shard name (the same problems in every run)


def chunks(store: Path) -> dict[str, float]:
    """Every committed chunk shard -> when it was stored (written to a temporary name, then
    renamed: the time it was written)."""
    folder = store / "generations"
    if not folder.is_dir():
        return {}
    files = folder.glob("*~*.parquet")  # not a chunk in flight (its temporary ".tmp-" name)
    return {p.name: p.stat().st_mtime for p in files if not p.name.startswith(".tmp-")}


def digests(store: Path) -> dict[str, tuple[str, int]]:
    """Every committed chunk shard -> (sha256 of its bytes, its mtime in ns): a shard written
    again, even with the same bytes, changes the second."""
    out = {}
    for name in chunks(store):
        path = store / "generations" / name
        out[name] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    return out


def rows(store: Path, names) -> int:
    return sum(pq.read_metadata(store / "generations" / n).num_rows for n in names)


def launch(args, store: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "orchestrator.cli", "run", *grid(args), f"store={store}"]
    with open(log, "w") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT
        )


def session_alive(sid: int) -> list[int]:
    """Live (not zombie) processes of session `sid`. Everything a launch started stays in its
    session, also where it took a process group of its own (Ray's workers do)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp session
        if int(fields[3]) == sid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


def names(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode())
        except OSError:
            continue  # gone meanwhile
    return out


def reap(proc: subprocess.Popen) -> tuple[list[str], int]:
    """Wait for the launch and every process of its session (the session id is the launch's
    pid). (alive right after the launch ended, alive after GRACE_S); the second ones are
    SIGKILLed here, one by one: all of them are this script's."""
    proc.wait()
    lingering = names(session_alive(proc.pid))
    deadline = time.monotonic() + GRACE_S
    while session_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = session_alive(proc.pid)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return lingering, len(left)


def samples_to_generate(log: Path) -> int:
    found = ENGINE_LINE.search(log.read_text(errors="replace"))
    return int(found.group(1)) if found else 0  # no engine line: nothing left to generate


def kill_once(args, store: Path, log: Path, rng: random.Random) -> Kill | None:
    """One launch, SIGKILLed at a random moment after its first own commit (None: it ended
    before that)."""
    before = chunks(store)
    started_wall, started = time.time(), time.monotonic()
    proc = launch(args, store, log)
    while not set(chunks(store)) - set(before):
        if proc.poll() is not None:
            reap(proc)
            return None
        time.sleep(0.1)
    deadline = time.monotonic() + rng.uniform(0, args.max_wait)
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    if proc.poll() is not None:
        reap(proc)
        return None
    killed_wall, at_s = time.time(), time.monotonic() - started
    os.killpg(proc.pid, signal.SIGKILL)
    lingering, left = reap(proc)
    after = chunks(store)
    mine = [n for n in after if n not in before]
    last = max([started_wall, *(after[n] for n in mine)])
    return Kill(at_s, rows(store, after), rows(store, mine), killed_wall - last, lingering, left)


def finish(args, store: Path, log: Path) -> tuple[float, int]:
    """The same command to the end: (wall seconds, processes it had to kill afterwards)."""
    started = time.monotonic()
    proc = launch(args, store, log)
    if proc.wait() != 0:
        raise SystemExit(f"run failed ({proc.returncode}); its output: {log}")
    wall = time.monotonic() - started
    return wall, reap(proc)[1]


def read(store: Path, table: str):
    from storage.store import Store

    return Store(str(store)).read_table(table).to_pandas()


def first_commit(store: Path, before: dict[str, float]) -> list[str]:
    new = {n: t for n, t in chunks(store).items() if n not in before}
    return [min(new, key=new.get)] if new else []


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument("--kills", type=int, default=10, help="SIGKILLs (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--limit", type=int, default=40, help="problems per setting (default 40)")
    parser.add_argument("--chunk", type=int, default=2, help="samples per chunk (default 2)")
    parser.add_argument(
        "--max-length", type=int, default=1024, help="max_length of the settings (default 1024)"
    )
    parser.add_argument(
        "--max-wait",
        type=float,
        default=4.0,
        help="longest wait after a launch's first commit before the kill (s, default 4)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the stores and logs")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # the store reader of this checkout, as the launches use
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    work = Path(tempfile.mkdtemp(prefix="reprogrid-bench-kill-"))
    store, fresh = work / "killed", work / "fresh"
    rng = random.Random(args.seed)
    kills: list[Kill] = []
    seen: dict[str, tuple[str, int]] = {}  # every shard committed before a kill, as it was
    started = time.monotonic()
    try:
        for i in range(args.kills + 1):
            log = work / f"launch-{i:02d}.log"
            before = chunks(store)
            if i < args.kills:
                kill = kill_once(args, store, log, rng)
            else:
                kill = None
                finish(args, store, log)
            if kills:
                kills[-1].relaunch_generates = samples_to_generate(log)
                redone = first_commit(store, before)
                kills[-1].redone = rows(store, redone)
                kills[-1].redone_chunk = redone[0] if redone else None
            if kill is None:
                if i < args.kills:  # it ended before the kill: run it to the end anyway
                    finish(args, store, log)
                break
            kills.append(kill)
            seen.update(digests(store))
        killed_s = time.monotonic() - started
        clean_s, _ = finish(args, fresh, work / "fresh.log")
        rewritten = sum(1 for n, d in digests(store).items() if n in seen and seen[n] != d)
        report(args, kills, store, fresh, killed_s, clean_s, rewritten)
    finally:
        if args.keep:
            print(f"stores and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def chunk_durations(store: Path) -> dict[str, float]:
    """Each chunk of an uninterrupted one-engine run -> seconds since the commit before it
    (the first chunk, which waited for the engine's load, has none)."""
    order = sorted(chunks(store).items(), key=lambda item: item[1])
    return {name: t - prev for (_, prev), (name, t) in zip(order, order[1:], strict=False)}


def report(args, kills, store, fresh, killed_s, clean_s, rewritten) -> None:
    gens, clean = read(store, "generations"), read(fresh, "generations")
    settings, runs = read(store, "settings"), read(store, "runs")
    total = len(clean)
    chunk_s = read(fresh, "settings").generation_s.sum() / len(chunks(fresh))
    # A chunk's shard name is the same problems in both stores: the killed store's lost chunk
    # index is reused by the relaunch for the same next problems.
    durations = chunk_durations(fresh)
    print(
        f"tiny model, hf, fp32, 4 settings (instruct, yi x greedy, t0.2 on the harness stream) "
        f"x {args.limit} problems = {total} samples, max_length {args.max_length}, chunks of "
        f"{args.chunk} samples, 1 engine, {os.cpu_count()} cores, seed {args.seed}"
    )
    per_setting_s = read(fresh, "settings").generation_s
    print(
        f"a setting's generation in the uninterrupted run: {per_setting_s.min():.0f} to "
        f"{per_setting_s.max():.0f} s"
    )
    print(
        f"{'kill':>4s} {'at_s':>5s} {'committed':>9s} {'+launch':>7s} {'relaunch gen':>12s} "
        f"{'= rest':>6s} {'redone':>6s} {'lost_s':>6s} {'chunk_s':>7s} "
        f"{'processes':>12s}"
    )
    within = 0
    for i, k in enumerate(kills, 1):
        rest = total - k.committed
        ok = "yes" if k.relaunch_generates == rest else f"NO {rest}"
        own = durations.get(k.redone_chunk or "")
        within += own is not None and k.lost_s <= own
        shown = f"{own:7.1f}" if own is not None else f"{'-':>7s}"
        print(
            f"{i:4d} {k.at_s:5.1f} {k.committed:9d} {k.this_launch:7d} "
            f"{k.relaunch_generates:12d} {ok:>6s} {k.redone:6d} {k.lost_s:6.1f} {shown} "
            f"{len(k.lingering):7d} -> {k.left}"
        )
    print(
        "(redone: samples of the relaunch's first chunk; lost_s: since the killed launch's "
        "last commit; chunk_s: that chunk's time in the uninterrupted run; processes: of the "
        f"launch, alive just after the kill -> after {GRACE_S:.0f} s)"
    )
    if kills:
        print(
            f"redone per kill: max {max(k.redone for k in kills)} samples, one chunk "
            f"({args.chunk} samples) of the one engine; lost generation per kill: mean "
            f"{statistics.mean(k.lost_s for k in kills):.1f} s, max "
            f"{max(k.lost_s for k in kills):.1f} s, within the lost chunk's own time in "
            f"{within}/{len(kills)} kills; a chunk takes {chunk_s:.1f} s on average"
        )
    ours = dict(zip(map(tuple, gens[KEY].values.tolist()), gens.program, strict=True))
    theirs = dict(zip(map(tuple, clean[KEY].values.tolist()), clean.program, strict=True))
    per_setting = sorted(set(gens.groupby("setting_key").size()))
    dup = int(gens.duplicated(KEY).sum())
    print(
        f"settings complete: {int((settings.status == 'complete').sum())}/{len(settings)}; "
        f"rows per setting: {per_setting}; duplicate rows: {dup}; committed chunks written "
        f"again: {rewritten}"
    )
    print(
        f"programs equal to the uninterrupted run's: {'yes' if ours == theirs else 'NO'} "
        f"({len(ours)} and {len(theirs)} samples)"
    )
    counts = {str(k): int(v) for k, v in runs.status.value_counts().items()}
    print(f"runs recorded: {counts}")
    lingering = [n for k in kills for n in k.lingering]
    kinds = ", ".join(f"{n} x{lingering.count(n)}" for n in sorted(set(lingering)))
    print(
        f"processes of killed launches alive just after the kill: {len(lingering)} "
        f"({kinds or 'none'}); after {GRACE_S:.0f} s: {sum(k.left for k in kills)}"
    )
    print(
        f"wall: {killed_s:.0f} s with {len(kills)} kills and relaunches, "
        f"{clean_s:.0f} s uninterrupted"
    )


if __name__ == "__main__":
    main()
