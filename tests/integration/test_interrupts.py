"""Interrupting a real run (issues 22, §1 and 32, item 4): SIGTERM and SIGINT on the
transformers path with the tiny model, at the moments a preemption lands, from the first line
of `reprogrid run` to its last — while the config loads and the run waits for the writer lock,
while Ray's services start, while the driver connects to them, as Ray is ready, while the
engine builds, mid-generation, while programs execute, while a chunk commits, while the run
compacts the store and while the command prints its scores — to the driver alone and to its
whole process group. Each stop exits 143 / 130 with no traceback, marks its run `interrupted`
once its row exists (nothing is written before), leaves no process of the local Ray it started
(found by a marker in the driver's environment, which every process of its Ray inherits: Ray's
services and workers run in process groups of their own, so the driver's group alone would
miss them), and the resumed run's programs equal an uninterrupted run's. The moments are
found from what the driver does (its signal handler, its open lock file, Ray's processes and
log files, its log lines), not from a fixed sleep.

The fake backend once stopped cleanly while the real one crashed (a handler raising inside
Ray's `wait` became a SystemError), which is why these run on the real path."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.cli.main import main
from storage.lock import LOCK_FILE
from storage.store import TEMP_PREFIX
from tests.processes import (
    alive_in_group,
    alive_with_env,
    left_behind,
    lock_held_elsewhere,
    run_marker,
)

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
# Two settings of the tiny model on 8 problems, one chunk per sample: greedy and the harness's
# sequential random stream (which a resume must continue exactly).
GRID = [
    "model=tiny",
    "benchmark.limit=8",
    "max_length=384",
    "template=instruct",
    "decoding=greedy,t0.8",
    "checkpoint.every_samples=1",
    "cluster.num_cpus=2",
]
COLUMNS = ["setting_key", "task_id", "sample_index", "continuation", "program"]
# How long a stop may take before the test calls it a hang. The clean stop itself takes seconds
# (about 2 s measured here to the driver's exit, most of it Ray stopping its processes); tests
# never fail on timings, so the figure is logged, not asserted.
HANG_S = 240


def programs(store: Path) -> pd.DataFrame:
    frame = pd.read_parquet(store / "generations", columns=COLUMNS)
    return frame.sort_values(COLUMNS[:3]).reset_index(drop=True)


@pytest.fixture(scope="module")
def reference(cache_dir, shared_data, tmp_path_factory) -> pd.DataFrame:
    """The same grid, uninterrupted."""
    store = tmp_path_factory.mktemp("reference") / "store"
    env = _env(cache_dir, shared_data)
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", *GRID, f"store={store}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    frame = programs(store)
    assert len(frame) == 16
    return frame


def _env(cache_dir: Path, shared_data: Path) -> dict[str, str]:
    return {
        **os.environ,
        "REPROGRID_CACHE_DIR": str(cache_dir),
        "REPROGRID_DATA_DIR": str(shared_data),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
        "PYTHONPATH": str(ROOT),
    }


class Driver:
    """`reprogrid run` in its own process group, its output read line by line; `marker` is in
    its environment, and so in every process its local Ray starts."""

    def __init__(self, args: list[str], env: dict[str, str]):
        self.marker = run_marker()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", "run", *args],
            env={**env, self.marker[0]: self.marker[1]},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, ready: Callable[[], bool], what: str, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            assert self.proc.poll() is None, f"ended before {what}:\n{self.output}"
            assert time.monotonic() < deadline, f"never saw {what}:\n{self.output}"
            time.sleep(0.05)

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def signal(self, signum: int, group: bool) -> int:
        """Send the signal; wait for the exit (bounded); the exit code."""
        stopped_at = time.monotonic()
        if group:
            os.killpg(self.proc.pid, signum)  # what a scheduler does to a job step
        else:
            os.kill(self.proc.pid, signum)
        code = self.proc.wait(HANG_S)
        self._reader.join(10)
        logging.getLogger(__name__).info(
            "stopped %.1f s after the signal", time.monotonic() - stopped_at
        )
        return code

    @property
    def output(self) -> str:
        return "".join(self.lines)


def chunks(store: Path) -> int:
    """Committed chunk files (a temporary one is a chunk still being written)."""
    folder = store / "generations"
    if not folder.is_dir():
        return 0
    return sum(1 for p in folder.glob("*~*.parquet") if not p.name.startswith(TEMP_PREFIX))


def outside_its_group(driver: Driver) -> list[int]:
    """The run's processes outside the driver's process group: Ray's workers, which a check of
    the group alone would not see."""
    found = []
    for pid in alive_with_env(*driver.marker):
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(pid) != driver.proc.pid:
                found.append(pid)
    return found


# How long the local Ray's processes may take to exit after the driver has.
RAY_EXIT_S = 30


def assert_clean_stop(code: int, out: str, signum: int, store: Path, driver: Driver) -> None:
    name = signal.Signals(signum).name
    assert code == 128 + signum, out
    assert "Traceback" not in out and "SystemError" not in out, out
    assert "will be retried" not in out and "retries remaining" not in out, out
    assert "SIGTERM received" not in out, out  # the core worker's crash handler took it
    assert f"interrupted by {name}" in out, out
    assert list(pd.read_parquet(store / "runs").status) == ["interrupted"]
    # every process of the local Ray it started is gone (GCS, raylet, dashboard, workers),
    # whichever process group it is in (a leftover is stopped, then reported)
    left = left_behind(*driver.marker, timeout_s=RAY_EXIT_S)
    assert left == [], f"processes of the run left behind: {left}\n{out}"


def resume_and_compare(store: Path, env: dict[str, str], reference: pd.DataFrame) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", *GRID, f"store={store}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    resumed = programs(store)
    assert not resumed.duplicated(COLUMNS[:3]).any()
    pd.testing.assert_frame_equal(resumed, reference)
    assert set(pd.read_parquet(store / "settings").status) == {"complete"}
    runs = pd.read_parquet(store / "runs").sort_values("started_at")
    assert list(runs.status) == ["interrupted", "finished"]


@pytest.mark.parametrize(
    "moment, signum, group",
    [
        ("engine builds", signal.SIGTERM, False),
        # the same moments again with the other signal and target: the path is the same
        pytest.param("engine builds", signal.SIGINT, True, marks=pytest.mark.slow),
        ("mid-generation", signal.SIGTERM, True),
        pytest.param("mid-generation", signal.SIGINT, False, marks=pytest.mark.slow),
        ("programs execute", signal.SIGTERM, True),
    ],
)
def test_a_signal_stops_a_real_run_cleanly_and_it_resumes_exactly(
    moment, signum, group, cache_dir, shared_data, reference, tmp_path
):
    env = _env(cache_dir, shared_data)
    store = tmp_path / "store"
    driver = Driver([*GRID, f"store={store}"], env)
    if moment == "engine builds":
        # the engine's actor is created (its model loading) right after this line, and no
        # sample is generated before it has loaded
        driver.wait_for(lambda: driver.saw("samples to generate on"), "the engine start")
        assert chunks(store) == 0
    elif moment == "mid-generation":
        driver.wait_for(lambda: chunks(store) >= 3, "three committed chunks")
    else:
        # the first setting is generated: its programs go to an execution task while the
        # second one generates
        driver.wait_for(lambda: driver.saw("generated tiny/hf/fp32/none"), "a generated setting")
    if moment != "engine builds":  # the engine's worker runs: the marker finds it
        assert outside_its_group(driver), "no process of the run outside its process group"
    # the signal to the group reaches the driver alone: Ray's GCS and raylet, killed with it,
    # once left the driver inside a call that needed them until Ray ended it with exit 1
    assert alive_in_group(driver.proc.pid) == [driver.proc.pid]
    code = driver.signal(signum, group)
    assert_clean_stop(code, driver.output, signum, store, driver)
    if moment == "engine builds":
        assert chunks(store) == 0
    resume_and_compare(store, env, reference)


def holds_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd) == str(path):
                return True
    return False


# `reprogrid run` with a signal sent to itself from inside one library function, at the
# moment it is called: argv is the function's module, its name, the signal, then the command.
SIGNAL_INSIDE = textwrap.dedent(
    """
    import importlib, os, signal, sys

    from orchestrator.cli.main import main

    module, name, signame = sys.argv[1:4]
    owner = importlib.import_module(module)
    original = getattr(owner, name)

    def with_a_signal(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, signame))  # delivered before the call
        return original(*args, **kwargs)

    setattr(owner, name, with_a_signal)
    sys.exit(main(sys.argv[4:]))
    """
)


def signal_inside(
    function: str, signum: int, args: list[str], env: dict[str, str]
) -> tuple[int, str, tuple[str, str]]:
    """Run SIGNAL_INSIDE in a process of its own (where a stop that escapes the command's
    handler ends that process, not pytest); its exit code, output and marker."""
    module, name = function.rsplit(".", 1)
    marker = run_marker()
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_INSIDE, module, name, signal.Signals(signum).name, *args],
        env={**env, marker[0]: marker[1]},
        capture_output=True,
        text=True,
        timeout=900,
    )
    return proc.returncode, proc.stdout + proc.stderr, marker


def assert_nothing_recorded(code: int, out: str, signum: int, store: Path, marker) -> None:
    """A stop before the run's row exists: 143 / 130, no traceback, no row, no Ray."""
    assert code == 128 + signum, out
    assert "Traceback" not in out, out
    assert f"interrupted by {signal.Signals(signum).name}" in out, out
    assert "starting a local Ray instance" not in out, out
    assert not (store / "runs").exists(), out  # no run row: nothing to resume
    assert left_behind(*marker, timeout_s=RAY_EXIT_S) == []


@pytest.mark.parametrize(
    "function",
    ["orchestrator.run.config.load.load_run_config", "orchestrator.run.prepare.prepared.prepare"],
)
def test_a_signal_while_the_config_loads_or_the_grid_is_prepared(
    function, cache_dir, shared_data, tmp_path
):
    """SIGTERM as `reprogrid run` loads its config or prepares its grid, before anything else
    (a SIGTERM there once ended the process by its default action, signalled, not exit 143)."""
    store = tmp_path / "store"
    run = ["run", *GRID, f"store={store}"]
    env = _env(cache_dir, shared_data)
    code, out, marker = signal_inside(function, signal.SIGTERM, run, env)
    assert_nothing_recorded(code, out, signal.SIGTERM, store, marker)


def test_a_signal_while_the_run_waits_for_the_writer_lock(cache_dir, shared_data, tmp_path):
    """SIGINT while the run waits for another writer's lock (`--wait-lock 600`): the wait
    ends at once, not when the lock comes free or the wait runs out, and nothing is
    recorded."""
    env = _env(cache_dir, shared_data)
    store = tmp_path / "store"
    with lock_held_elsewhere(store, hold_s=2 * HANG_S):  # longer than the stop may take
        driver = Driver([*GRID, f"store={store}", "--wait-lock", "600"], env)
        pid = driver.proc.pid
        driver.wait_for(lambda: holds_open(pid, store / LOCK_FILE), "the wait for the lock")
        code = driver.signal(signal.SIGINT, group=False)
    assert_nothing_recorded(code, driver.output, signal.SIGINT, store, driver.marker)


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    """A private folder for the driver's Ray session (RAY_TMPDIR), where its core worker's log
    file shows when it connects. Short: Ray's sockets live under it (a Unix socket's path
    holds at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="rg"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def ray_service(marker: tuple[str, str], name: str) -> bool:
    """Whether a process of the run (its marker) runs the program `name` (Ray's GCS: gcs_server)."""
    for pid in alive_with_env(*marker):
        with contextlib.suppress(OSError):
            if name in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                return True
    return False


def driver_connecting(ray_tmp: Path, pid: int) -> bool:
    """Whether the driver's core worker exists (it writes its log file first, then installs
    Ray's crash handlers): the driver is connecting to its local Ray, inside `ray.init`."""
    return any(ray_tmp.glob(f"ray/session_*/logs/python-core-driver-*_{pid}.log"))


@pytest.mark.parametrize(
    "moment, signum, group",
    [
        ("Ray's services start", signal.SIGTERM, False),
        ("the driver connects to them", signal.SIGTERM, True),
        ("Ray is ready", signal.SIGINT, True),
    ],
)
def test_a_signal_while_ray_starts_stops_the_instance_and_the_run_resumes(
    moment, signum, group, cache_dir, shared_data, reference, tmp_path, ray_tmp
):
    """The moments around `ray.init`, where Ray's own handlers once ended the driver (exit 15
    from Ray's Python handler, exit 134 from its core worker's abort, the run `failed`): the
    driver acts on the signal once Ray has started, and stops the instance it started."""
    env = {**_env(cache_dir, shared_data), "RAY_TMPDIR": str(ray_tmp)}
    store = tmp_path / "store"
    driver = Driver([*GRID, f"store={store}"], env)
    pid = driver.proc.pid
    if moment == "Ray's services start":
        driver.wait_for(lambda: ray_service(driver.marker, "gcs_server"), "Ray's GCS")
    elif moment == "the driver connects to them":
        driver.wait_for(lambda: driver_connecting(ray_tmp, pid), "the driver's core worker")
    else:
        driver.wait_for(lambda: driver.saw("Ray ready at"), "Ray ready")
    if moment != "Ray is ready":
        assert not driver.saw("Ray ready at")  # still inside ray.init
    code = driver.signal(signum, group)
    assert_clean_stop(code, driver.output, signum, store, driver)
    assert chunks(store) == 0
    resume_and_compare(store, env, reference)


def test_a_signal_during_a_chunk_commit_keeps_the_chunk_whole(
    env, reference, tmp_path, monkeypatch, capsys
):
    """The signal lands in the middle of the driver's commit of a chunk (sent from inside it):
    the commit finishes, the run stops at its next safe point, and the chunk is intact."""
    from orchestrator.run.execute.writer import StoreWriter

    original = StoreWriter.chunk_generated
    calls = {"n": 0}

    def commit_with_a_signal(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # delivered while this commit runs
        return original(self, *args, **kwargs)

    monkeypatch.setattr(StoreWriter, "chunk_generated", commit_with_a_signal)
    store = tmp_path / "store"
    code = main(["run", *GRID, f"store={store}"])
    err = capsys.readouterr().err
    assert code == 143, err
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    assert list(pd.read_parquet(store / "runs").status) == ["interrupted"]
    assert chunks(store) >= 2  # the chunk being committed when the signal came is stored
    assert main(["verify", f"store={store}"]) == 0
    monkeypatch.setattr(StoreWriter, "chunk_generated", original)
    resume_and_compare(store, env, reference)


def test_a_signal_while_programs_execute_in_process(env, reference, tmp_path, monkeypatch):
    """SIGINT right after the driver hands a setting's programs to an execution task."""
    from orchestrator.run.execute.dispatch import Dispatcher

    original = Dispatcher._submit_exec
    sent = {"done": False}

    def submit_then_signal(self):
        original(self)
        if self._exec and not sent["done"]:
            sent["done"] = True
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(Dispatcher, "_submit_exec", submit_then_signal)
    store = tmp_path / "store"
    assert main(["run", *GRID, f"store={store}"]) == 130
    assert sent["done"]
    assert list(pd.read_parquet(store / "runs").status) == ["interrupted"]
    monkeypatch.setattr(Dispatcher, "_submit_exec", original)
    resume_and_compare(store, env, reference)


def test_a_signal_while_the_run_compacts_the_store(cache_dir, shared_data, reference, tmp_path):
    """SIGTERM while the run packs the store's shards at its end (compaction.after_run), after
    it stopped the local Ray: the compaction, a library call, finishes; the run then stops with
    143 and its row `interrupted`, the store verifies, and the resumed run has nothing left to
    generate. (Ray's shutdown once set SIGTERM back to its default, and this signal killed the
    driver outright.)"""
    env = _env(cache_dir, shared_data)
    store = tmp_path / "store"
    run = ["run", *GRID, "compaction.after_run=1", f"store={store}"]
    code, out, marker = signal_inside("storage.compact.compact_if_due", signal.SIGTERM, run, env)
    assert code == 143, out
    assert "interrupted by SIGTERM" in out and "Traceback" not in out, out
    assert list(pd.read_parquet(store / "runs").status) == ["interrupted"]
    assert (store / "_manifest.json").exists(), out  # the compaction finished
    assert left_behind(*marker, timeout_s=RAY_EXIT_S) == []
    assert main(["verify", f"store={store}"]) == 0
    resume_and_compare(store, env, reference)


def test_a_signal_while_the_command_prints_its_scores(cache_dir, shared_data, reference, tmp_path):
    """SIGTERM after the run's last write (its row closed `finished`, the lock released), while
    the command reads the scores it prints: 143, no traceback. The row stays `finished`: every
    setting is stored, and the programs are the uninterrupted run's with no second run."""
    env = _env(cache_dir, shared_data)
    store = tmp_path / "store"
    run = ["run", *GRID, f"store={store}"]
    code, out, marker = signal_inside(
        "orchestrator.report.screens.scores.score_table", signal.SIGTERM, run, env
    )
    assert code == 143, out
    assert "interrupted by SIGTERM" in out and "Traceback" not in out, out
    assert list(pd.read_parquet(store / "runs").status) == ["finished"]
    assert left_behind(*marker, timeout_s=RAY_EXIT_S) == []
    pd.testing.assert_frame_equal(programs(store), reference)
