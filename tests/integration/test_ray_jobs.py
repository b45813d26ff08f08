"""A run submitted through the Ray Jobs API and stopped with `ray job stop` (issue 35, item 1):
what a KubeRay RayJob's deletion or retry does to its driver.

One local Ray head with its dashboard (the Jobs API lives there), started by the test as an
operator would (`ray start --head --block`, its own session, temp folder and ports) and stopped
by its own pid; an S3 stand-in (moto in server mode) holds the store. Each job runs
`reprogrid run ... cluster.address=auto store=s3://...` on the real transformers path with the
tiny model. `ray job stop` sends the driver SIGTERM, then SIGKILL after
`RAY_JOB_STOP_WAIT_TIME_S` (Ray's job supervisor reads it from its environment, which the job's
runtime env sets here; the RayJob recipe sets it on the head):

* 0 s: the driver is SIGKILLed at once. Its lock object is left behind, naming it, and the next
  submission takes it over once its lease (`store_lock.lease_s`, short here) has gone
  unrenewed; the run row stays `running` until then.
* 60 s (the recipe's): the driver stops cleanly (143), its run row `interrupted`, the lock
  released.

The stop lands as the driver calls `ray.init` (Ray starting in the driver), mid-generation
(chunks committed, more in flight) and mid-commit (a chunk's temporary object written, not yet
moved into place). Then the same job is submitted again: it finishes, every chunk committed
before the stop is still there unchanged (nothing lost, nothing written twice), nothing is
duplicated, no temporary object or lock is left, and the programs equal an uninterrupted job's.
Each submission's driver runs as if on a head pod of its own (a RayJob's retry is a new
cluster): its lock names its own host, so a lock left behind is taken over by its lease, never
because its pid is seen gone on this host. Every process of a job (its driver, its engine and
execution workers) and of the head is found by a marker in its environment, and none is left.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.fs as pafs
import pytest

from storage.index import build_index
from storage.store import LOCK_OBJECT, TEMP_PREFIX, Store
from tests.integration.test_object_store import BUCKET, CREDENTIALS, moto_bucket
from tests.ports import free_ports
from tests.processes import alive_with_env, left_behind, run_marker

pytest.importorskip("transformers")
if importlib.util.find_spec("aiohttp_cors") is None:  # ray[default]: the dashboard's packages
    pytest.skip("the Ray Jobs API needs Ray's dashboard (ray[default])", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
NODE_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
# Two settings of the tiny model on 8 problems, one chunk per sample: greedy and the harness's
# sequential random stream (which a resume must continue exactly).
GRID = [
    "model=tiny",
    "benchmark.limit=8",
    "max_length=384",
    "template=instruct",
    "decoding=greedy,t0.8",
    "checkpoint.every_samples=1",
    "cluster=ray",
    "cluster.cpu_if_no_gpus=true",  # the head has no GPU: the tiny model runs on its CPU
    "cluster.address=auto",  # RAY_ADDRESS, which the job supervisor sets for its driver
    "store_lock.lease_s=5",  # a lock left by a SIGKILLed driver is taken over 5 s on
]
N_SAMPLES = 16
COLUMNS = ["setting_key", "task_id", "sample_index", "continuation", "program"]
# How long a job's processes may take to exit once it has stopped or finished.
RAY_EXIT_S = 60

# The job's entrypoint: `reprogrid` with the test's hooks. argv: the lock's host name, where to
# pause (`-`, `ray.init`, `commit:N`: in the Nth commit of a generations chunk, or `after:N`:
# once it is committed), the file that says the driver has paused there, then the command.
ENTRY = '''
import signal, sys, time, types
from pathlib import Path

import storage.lock
from orchestrator.cli.main import main
from storage.store import Store

host, pause, flag = sys.argv[1:4]
# the host a lock names: this submission's own, as on a head pod of its own
storage.lock.socket = types.SimpleNamespace(gethostname=lambda: host)


def wait_for_the_stop():
    """Say so, then wait until the run's handler has recorded the stop signal: a clean stop
    goes on from here, a SIGKILL ends the driver here."""
    Path(flag).write_text("paused")
    stop = signal.getsignal(signal.SIGTERM).__self__  # the run's StopRequest
    deadline = time.monotonic() + 300
    while not stop.requested and time.monotonic() < deadline:
        time.sleep(0.05)


if pause == "ray.init":
    import ray

    real_init = ray.init

    def init(*args, **kwargs):
        wait_for_the_stop()
        return real_init(*args, **kwargs)

    ray.init = init
elif pause.startswith(("commit:", "after:")):
    where, _, nth = pause.partition(":")
    seen = []
    real_commit = Store._commit  # a written temporary object -> its final name

    def commit(self, temp, path):
        if "/generations/" not in path:
            return real_commit(self, temp, path)
        seen.append(path)
        if where == "commit" and len(seen) == int(nth):
            wait_for_the_stop()
        done = real_commit(self, temp, path)
        if where == "after" and len(seen) == int(nth):
            wait_for_the_stop()  # the engines go on generating meanwhile
        return done

    Store._commit = commit

sys.exit(main(sys.argv[4:]))
'''


@dataclass
class Head:
    """A Ray head with its dashboard: `ray start --head --block` in a session of its own."""

    proc: subprocess.Popen
    temp_dir: str
    dashboard: str  # http://127.0.0.1:PORT, the Jobs API
    marker: tuple[str, str]  # in the environment of every process of the head
    log: Path

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(f"{self.dashboard}{path}", timeout=30) as answer:
            return json.loads(answer.read())

    def stop(self) -> list[int]:
        """SIGTERM to `ray start --block` (it stops the processes it started), then the head's
        processes still alive after a bounded wait (killed, see `left_behind`)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(60)
        left = left_behind(*self.marker, timeout_s=RAY_EXIT_S)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return left


def start_head(log: Path) -> Head:
    # A short temp folder: Ray puts Unix sockets under it (a socket path holds 107 bytes).
    temp_dir = tempfile.mkdtemp(prefix="rgj-")
    ports = (
        "node-manager",
        "object-manager",
        "dashboard-agent-listen",
        "dashboard-agent-grpc",
        "runtime-env-agent",
        "metrics-export",
        "ray-client-server",
    )
    dashboard_port, gcs_port, *node = free_ports(2 + len(ports))
    marker = run_marker()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                RAY,
                "start",
                "--head",
                "--block",
                f"--port={gcs_port}",
                "--include-dashboard=true",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={dashboard_port}",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=2",
                "--num-gpus=0",
                "--object-store-memory=200000000",
                "--disable-usage-stats",
                f"--temp-dir={temp_dir}",
                *(f"--{name}-port={port}" for name, port in zip(ports, node, strict=True)),
            ],
            env={**os.environ, **NODE_ENV, marker[0]: marker[1]},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return Head(proc, temp_dir, f"http://127.0.0.1:{dashboard_port}", marker, log)


@pytest.fixture(scope="module")
def head(tmp_path_factory) -> Iterator[Head]:
    node = start_head(tmp_path_factory.mktemp("head") / "head.log")
    try:
        wait_until(lambda: _answers(node), "the Jobs API", lambda: node.log.read_text(), 180)
        yield node
    finally:
        left = node.stop()
    assert left == [], f"processes of the head left behind: {left}"


def _answers(node: Head) -> bool:
    assert node.proc.poll() is None, f"the head exited\n{node.log.read_text()}"
    try:
        node.get("/api/jobs/")
    except (OSError, ValueError):
        return False
    return True


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """The object store's stand-in: a moto S3 server with one bucket; its endpoint."""
    with moto_bucket() as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def entry(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("entry") / "reprogrid_job.py"
    path.write_text(ENTRY)
    return path


def wait_until(ready: Callable[[], bool], what: str, context: Callable[[], str], timeout: float):
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"never saw {what}\n{context()}"
        time.sleep(0.1)


@dataclass
class Job:
    """One `ray job submit` of `reprogrid run` on the store `prefix`."""

    head: Head
    submission_id: str
    host: str  # the host name its lock names
    flag: Path  # written when the driver pauses where it was told to
    marker: tuple[str, str]  # in the environment of the job's processes (runtime env)

    def info(self) -> dict:
        return self.head.get(f"/api/jobs/{self.submission_id}")

    def logs(self) -> str:
        return str(self.head.get(f"/api/jobs/{self.submission_id}/logs")["logs"])

    def running(self) -> bool:
        status = self.info()["status"]
        assert status in ("PENDING", "RUNNING"), f"the job is {status}\n{self.logs()}"
        return status == "RUNNING"

    def wait_for(self, ready: Callable[[], bool], what: str, timeout: float = 600) -> None:
        wait_until(lambda: self.running() and ready(), what, self.logs, timeout)

    def finish(self, timeout: float = 600) -> str:
        """Wait for the job to end; it must have succeeded. Its logs."""
        deadline = time.monotonic() + timeout
        while (status := self.info()["status"]) in ("PENDING", "RUNNING"):
            assert time.monotonic() < deadline, f"the job did not finish\n{self.logs()}"
            time.sleep(0.5)
        assert status == "SUCCEEDED", self.logs()
        return self.logs()

    def stop(self) -> str:
        """`ray job stop` (it returns once the job has stopped); the job's logs."""
        done = subprocess.run(
            [RAY, "job", "stop", "--address", self.head.dashboard, self.submission_id],
            env={**os.environ, **NODE_ENV},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert self.info()["status"] == "STOPPED", self.logs()
        return self.logs()

    def driver_pid(self) -> int:
        """The driver: the job's Python process running the entrypoint script (the job
        supervisor runs it under `/bin/sh -c`)."""
        for pid in alive_with_env(*self.marker):
            with contextlib.suppress(OSError):
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if args[0] != b"/bin/sh" and any(a.endswith(b"reprogrid_job.py") for a in args):
                    return pid
        raise AssertionError(f"no driver process\n{self.logs()}")


def submit(
    head: Head,
    env: dict[str, str],
    entry: Path,
    prefix: str,
    *,
    host: str,
    pause: str = "-",
    stop_wait_s: int = 60,
) -> Job:
    marker = run_marker()
    submission_id = f"{prefix}-{host}-{uuid.uuid4().hex[:6]}"
    flag = entry.parent / f"{submission_id}.paused"
    job_env = {
        **{k: env[k] for k in ("REPROGRID_CACHE_DIR", "REPROGRID_DATA_DIR")},
        **CREDENTIALS,
        "AWS_ENDPOINT_URL": env["AWS_ENDPOINT_URL"],  # the store is a plain s3://BUCKET/prefix
        **NODE_ENV,
        "PYTHONPATH": str(ROOT),
        "RAY_JOB_STOP_WAIT_TIME_S": str(stop_wait_s),  # read by the job's supervisor
        marker[0]: marker[1],
    }
    command = [
        sys.executable,
        str(entry),
        host,
        pause,
        str(flag),
        "run",
        *GRID,
        f"store=s3://{BUCKET}/{prefix}",
    ]
    done = subprocess.run(
        [
            RAY,
            "job",
            "submit",
            "--address",
            head.dashboard,
            "--no-wait",
            "--submission-id",
            submission_id,
            "--runtime-env-json",
            json.dumps({"env_vars": job_env}),
            "--",
            *command,
        ],
        env={**os.environ, **NODE_ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return Job(head, submission_id, host, flag, marker)


@pytest.fixture(scope="module")
def job_env(cache_dir, shared_data, s3) -> dict[str, str]:
    return {
        "REPROGRID_CACHE_DIR": str(cache_dir),
        "REPROGRID_DATA_DIR": str(shared_data),
        "AWS_ENDPOINT_URL": s3,
    }


def store_at(endpoint: str, prefix: str) -> Store:
    return Store(f"s3://{BUCKET}/{prefix}?endpoint_override={endpoint}&scheme=http")


def programs(store: Store) -> pd.DataFrame:
    frame = store.read_table("generations").to_pandas()[COLUMNS]
    return frame.sort_values(COLUMNS[:3]).reset_index(drop=True)


@pytest.fixture(scope="module")
def reference(head, job_env, entry, s3) -> pd.DataFrame:
    """The same grid as a job that nobody stops."""
    submit(head, job_env, entry, "reference", host="pod-reference").finish()
    frame = programs(store_at(s3, "reference"))
    assert len(frame) == N_SAMPLES
    return frame


def objects(store: Store, table: str) -> dict[str, tuple[int | None, object]]:
    """The objects under a table's folder: name -> (size, modification time)."""
    selector = pafs.FileSelector(store.table_dir(table), allow_not_found=True)
    return {i.base_name: (i.size, i.mtime) for i in store.fs.get_file_info(selector)}


def chunks(store: Store) -> dict[str, tuple[int | None, object]]:
    """The committed chunk objects of the generations table (a temporary one is a chunk still
    being written)."""
    return {
        name: stamp
        for name, stamp in objects(store, "generations").items()
        if "~" in name and not name.startswith(TEMP_PREFIX)
    }


def temporaries(store: Store) -> list[str]:
    return [n for n in objects(store, "generations") if n.startswith(TEMP_PREFIX)]


def lock_content(store: Store) -> dict | None:
    path = f"{store.root}/{LOCK_OBJECT}"
    if store.fs.get_file_info(path).type == pafs.FileType.NotFound:
        return None
    with store.fs.open_input_stream(path) as fh:
        return json.loads(fh.read())


def run_statuses(store: Store) -> list[str]:
    runs = store.read_table("runs").to_pandas().sort_values("started_at")
    return list(runs.status)


@pytest.mark.parametrize(
    "moment, stop_wait_s",
    [
        ("mid-generation", 0),
        ("mid-commit", 60),
        # the other moment x wait pairs: the same stop and resume paths again
        pytest.param("ray.init", 0, marks=pytest.mark.slow),
        pytest.param("ray.init", 60, marks=pytest.mark.slow),
        pytest.param("mid-generation", 60, marks=pytest.mark.slow),
        pytest.param("mid-commit", 0, marks=pytest.mark.slow),
    ],
)
def test_a_stopped_ray_job_is_resumed_by_the_next_submission(
    moment, stop_wait_s, head, job_env, entry, s3, reference
):
    """`ray job stop` at `moment`, the supervisor's SIGKILL `stop_wait_s` after its SIGTERM;
    then the same job again: it resumes and finishes exactly once."""
    prefix = f"{moment.replace('.', '-')}-{stop_wait_s}s-{uuid.uuid4().hex[:6]}"
    store = store_at(s3, prefix)
    # mid-generation: the driver holds after its third commit while the engine generates on, so
    # the stop cannot come after the last chunk however long `ray job stop` takes to arrive
    pause = {"ray.init": "ray.init", "mid-commit": "commit:3", "mid-generation": "after:3"}[moment]
    job = submit(head, job_env, entry, prefix, host="pod-1", pause=pause, stop_wait_s=stop_wait_s)
    job.wait_for(job.flag.exists, f"the driver paused at {pause}")
    if moment == "mid-commit":
        assert len(chunks(store)) == 2 and len(temporaries(store)) == 1  # written, not moved
    driver = job.driver_pid()
    logs = job.stop()

    # what the stop left: the committed chunks, and the lock or not
    kept = chunks(store)
    assert len(kept) < N_SAMPLES, f"the stop came after the last chunk\n{logs}"
    if moment == "ray.init":
        assert not kept, logs
    lock = lock_content(store)
    if stop_wait_s == 0:  # SIGKILLed: no clean stop, the lock and the run row left as they were
        assert "interrupted by SIGTERM" not in logs, logs
        assert lock is not None, logs
        assert (lock["pid"], lock["host"], lock["lease_s"]) == (driver, "pod-1", 5.0)
        assert run_statuses(store) == ["running"]
        if moment == "mid-commit":
            assert len(kept) == 2 and len(temporaries(store)) == 1
        if moment == "mid-generation":  # killed where it held: the three chunks before
            assert len(kept) == 3
    else:  # a clean stop: the chunk being committed is stored, the lock released
        assert "interrupted by SIGTERM" in logs and "Traceback" not in logs, logs
        assert lock is None, logs
        assert run_statuses(store) == ["interrupted"]
        if moment == "mid-commit":  # the paused commit finished (and any chunk back by then)
            assert len(kept) >= 3 and not temporaries(store)
    assert left_behind(*job.marker, timeout_s=RAY_EXIT_S) == [], logs

    # the same job again, as a RayJob's retry on a new cluster would run it
    again = submit(head, job_env, entry, prefix, host="pod-2")
    logs = again.finish()
    took_over = f"taking over the writer lock of a driver that is gone (pid {driver} on pod-1"
    assert (took_over in logs) == (stop_wait_s == 0), logs
    assert left_behind(*again.marker, timeout_s=RAY_EXIT_S) == [], logs

    after = chunks(store)
    assert {name: after.get(name) for name in kept} == kept  # nothing committed lost or rewritten
    assert not temporaries(store) and lock_content(store) is None
    resumed = programs(store)
    assert not resumed.duplicated(COLUMNS[:3]).any()
    pd.testing.assert_frame_equal(resumed, reference)
    index = build_index(store)
    assert len(index) == 2 and all(s.complete for s in index.values())
    assert run_statuses(store) == ["interrupted", "finished"]
