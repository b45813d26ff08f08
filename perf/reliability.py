"""Reliability figures (issue 35, item 5): what stopped Ray jobs and lost nodes do to a run.

Part 1, job stops (issue 35, item 1): a Ray head with its Jobs API and a moto S3 server stand in
for a KubeRay head and an object store. Each round `ray job submit`s the tiny-model grid of
tests/integration/test_ray_jobs.py on a fresh store prefix, waits a random 0..--max-wait seconds
once the job runs (seeded by --seed: while Ray starts, mid-generation or mid-commit), `ray job
stop`s it (the supervisor's SIGKILL --stop-wait seconds after its SIGTERM, 0 or 60 in turn),
then submits the same job again, as a RayJob retry does, until it succeeds.

Part 2, node kills (issue 35, item 2): a Ray head without GPUs and two worker nodes (one fake
GPU each) run the two-unit tiny-model grid of tests/integration/test_multinode.py; each round
SIGKILLs every process of one worker once its unit has committed a random 1..14 of its 16
samples, and the one run must finish the grid by itself.

Printed per part: faults injected, runs finished, settings complete, duplicate samples,
committed chunks lost (a chunk committed when the fault came, missing or rewritten at the end),
and the rounds whose programs equal those of an uninterrupted run of the same grid.

    python perf/reliability.py                       # 10 job stops, 3 node kills, seed 0
    python perf/reliability.py --stops 20 --kills 5 --seed 3

The helpers (nodes, heads, jobs, S3) are the integration tests' own. Data from
REPROGRID_DATA_DIR; the tiny model is built on first use in REPROGRID_CACHE_DIR.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd
import pyarrow.fs as pafs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storage.store import Store  # noqa: E402
from tests.integration import test_multinode as multinode  # noqa: E402
from tests.integration import test_ray_jobs as jobs  # noqa: E402
from tests.integration.test_object_store import BUCKET, CREDENTIALS, _start_moto  # noqa: E402

KEY = ["setting_key", "task_id", "sample_index"]
UNIT_SAMPLES = 16  # a unit of the node-kill grid: 2 settings x 8 problems, a chunk per sample


@dataclass
class Tally:
    """One part's figures."""

    faults: int = 0
    finished: int = 0
    settings_complete: int = 0
    settings_expected: int = 0
    duplicates: int = 0
    chunks_lost: int = 0
    equal: int = 0

    def row(self, name: str) -> str:
        return (
            f"| {name} | {self.faults} | {self.finished}/{self.faults} | "
            f"{self.settings_complete}/{self.settings_expected} | {self.duplicates} | "
            f"{self.chunks_lost} | {self.equal}/{self.faults} |"
        )


def settle(tally: Tally, store: Store, reference: pd.DataFrame, committed: dict) -> None:
    """Count one round's store against the uninterrupted run: `committed` is the chunk
    objects (name -> size and time) when the fault came."""
    settings = store.read_table("settings").to_pandas()
    tally.settings_expected += reference.setting_key.nunique()
    tally.settings_complete += int((settings.status == "complete").sum())
    frame = store.read_table("generations").to_pandas()[jobs.COLUMNS]
    tally.duplicates += int(frame.duplicated(KEY).sum())
    now = jobs.chunks(store)
    tally.chunks_lost += sum(1 for name, stamp in committed.items() if now.get(name) != stamp)
    programs = frame.sort_values(KEY).reset_index(drop=True)
    tally.equal += int(programs.equals(reference))


# -- part 1: job stops ------------------------------------------------------------------------


def job_stops(args, work: Path, rng: random.Random) -> Tally:
    tally = Tally()
    os.environ.update(CREDENTIALS)  # pyarrow's S3 client in this process reads them
    moto, endpoint = _start_moto()
    head = jobs.start_head(work / "head.log")
    try:
        fs, _ = pafs.FileSystem.from_uri(
            f"s3://{BUCKET}?endpoint_override={endpoint}&scheme=http&allow_bucket_creation=true"
        )
        fs.create_dir(BUCKET)
        jobs.wait_until(lambda: jobs._answers(head), "the Jobs API", head.log.read_text, 180)
        entry = work / "reprogrid_job.py"
        entry.write_text(jobs.ENTRY)
        env = {**job_env(), "AWS_ENDPOINT_URL": endpoint}
        jobs.submit(head, env, entry, "reference", host="pod-reference").finish()
        reference = jobs.programs(jobs.store_at(endpoint, "reference"))
        for i in range(3 * args.stops):  # a job that ends before its stop is not counted
            if tally.faults == args.stops:
                break
            prefix = f"stop-{i}-{uuid.uuid4().hex[:6]}"
            stop_wait = (0, 60)[i % 2]
            job = jobs.submit(head, env, entry, prefix, host=f"pod-{i}a", stop_wait_s=stop_wait)
            jobs.wait_until(job.running, "the job to run", job.logs, 300)
            time.sleep(rng.uniform(0, args.max_wait))
            store = jobs.store_at(endpoint, prefix)
            if job.info()["status"] != "RUNNING":
                print(f"stop {i}: the job ended before its stop; not counted")
                continue
            try:
                job.stop()
            except AssertionError:  # it ended between the look and the stop
                print(f"stop {i}: the job ended before its stop; not counted")
                continue
            tally.faults += 1
            committed = jobs.chunks(store)
            retry = jobs.submit(head, env, entry, prefix, host=f"pod-{i}b", stop_wait_s=stop_wait)
            try:
                retry.finish()
                tally.finished += 1
            except AssertionError as e:
                print(f"stop {i}: the retry did not succeed\n{str(e)[-2000:]}")
            settle(tally, store, reference, committed)
            print(f"stop {i} ({stop_wait} s wait): {len(committed)} chunks committed at the stop")
    finally:
        head.stop()
        moto.terminate()
        moto.wait(10)
    return tally


def job_env() -> dict[str, str]:
    return {k: os.environ[k] for k in ("REPROGRID_CACHE_DIR", "REPROGRID_DATA_DIR")}


# -- part 2: node kills -----------------------------------------------------------------------


def node_kills(args, work: Path, rng: random.Random) -> Tally:
    tally = Tally()
    for i in range(args.kills):
        folder = work / f"kill-{i}"
        folder.mkdir()
        head_gen, (head, address, _) = started_head(folder)
        workers: list[multinode.RayNode] = []
        try:
            for name in ("worker-a", "worker-b"):  # one at a time: a loaded GCS times out
                node_args = [f"--address={address}", "--node-ip-address=127.0.0.1"]
                workers.append(multinode.start_node(node_args, folder / f"{name}.log"))
                ready = partial(joined, address, 1 + len(workers))
                multinode.wait_for(ready, f"{name} to join", [head, *workers])
            kill_round(i, folder, address, [head, *workers], args, rng, tally, work / "ref")
        finally:
            for node in workers:
                node.stop()
            head_gen.close()
    return tally


def started_head(folder: Path):
    """A head without GPUs (its generator, to close, and what it yields); started again when
    it does not come up: the free ports its helper picks one by one can collide."""
    for attempt in range(3):
        head_gen = multinode.started_head(folder, gpus=0)
        try:
            return head_gen, next(head_gen)
        except AssertionError as e:
            print(f"the head did not start (attempt {attempt + 1}): {str(e)[:200]}")
    raise RuntimeError(f"no head started; see {folder / 'head.log'}")


def joined(address: str, nodes: int) -> bool:
    return multinode.cluster_nodes(address) >= nodes


def kill_round(
    i: int,
    folder: Path,
    address: str,
    nodes: list[multinode.RayNode],
    args: argparse.Namespace,
    rng: random.Random,
    tally: Tally,
    ref: Path,
) -> None:
    """One run on the cluster, its second worker SIGKILLed mid-unit; the uninterrupted run of
    the same grid first, on the first round's cluster."""
    env, grid = dict(os.environ), [*multinode.GRID, f"cluster.address={address}"]
    if not ref.exists():
        multinode.finish(multinode.reprogrid(["run", *grid, f"store={ref}"], env))
    store = folder / "store"
    run = multinode.reprogrid(["run", *grid, f"store={store}"], env)
    doomed, target = nodes[-1], rng.randint(1, UNIT_SAMPLES - 2)
    on_doomed = partial(unit_reached, store, doomed.node_id(), target)
    multinode.wait_for(on_doomed, f"{target} samples of the doomed worker's unit", nodes, 300, 0.2)
    committed = jobs.chunks(Store(str(store)))
    doomed.kill()
    tally.faults += 1
    out = multinode.finish(run, timeout=900, ok=False)
    runs = Store(str(store)).read_table("runs").to_pandas()
    if run.returncode == 0 and list(runs.status) == ["finished"]:
        tally.finished += 1
    else:
        print(f"kill {i}: the run ended {run.returncode}\n{out[-2000:]}")
    settle(tally, Store(str(store)), reference_programs(Store(str(ref))), committed)
    print(f"kill {i}: {len(committed)} chunks committed at the kill")


def unit_reached(store: Path, node_id: str, target: int) -> bool:
    """The unit that generated a chunk on `node_id` has `target` samples committed or more."""
    frame = multinode.settings(store)
    if "node_ids" not in frame.columns:
        return False
    on_node = frame[frame.node_ids.map(lambda ids: ids is not None and node_id in list(ids))]
    try:
        done = pd.read_parquet(store / "generations", columns=["setting_key"])
    except (OSError, ValueError):
        return False
    unit = frame[frame.engine_key.isin(on_node.engine_key)]
    return not on_node.empty and done.setting_key.isin(unit.setting_key).sum() >= target


def reference_programs(store: Store) -> pd.DataFrame:
    frame = store.read_table("generations").to_pandas()[jobs.COLUMNS]
    return frame.sort_values(KEY).reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=10, help="Ray job stops (part 1)")
    parser.add_argument("--kills", type=int, default=3, help="worker node kills (part 2)")
    parser.add_argument("--max-wait", type=float, default=20.0, help="job stops: random wait, s")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("REPROGRID_CACHE_DIR", str(Path.home() / ".cache" / "reprogrid"))
    os.environ["PYTHONPATH"] = str(ROOT)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="rg-reliability-"))
    try:
        started = time.monotonic()
        rows = []
        if args.stops:
            rows.append(job_stops(args, work, rng).row("`ray job stop` at a random moment"))
            print(rows[-1])
        if args.kills:
            rows.append(node_kills(args, work, rng).row("a worker node SIGKILLed mid-unit"))
        print(f"\n{time.monotonic() - started:.0f} s, seed {args.seed}")
        print(
            "| fault | injected | runs finished | settings complete | duplicate samples | "
            "committed chunks lost | programs equal |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- |")
        print("\n".join(rows))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # the finally blocks stop Ray
    main()
