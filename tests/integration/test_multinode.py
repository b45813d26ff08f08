"""A two-node Ray cluster on one machine, started as an operator would (`ray start --head` and
`ray start --address=...`, one fake GPU each), driven by `reprogrid run cluster.address=...`.

* Engine units of the tiny model spread over two worker nodes (the stored provenance,
  settings.node_ids, says where each chunk ran); one worker is killed (every process of it,
  SIGKILL) while its unit generates: the run goes on with the node left, `status` says the node
  was lost and what was requeued, and the run finishes the grid, exactly once, with the
  programs of an uninterrupted run.
* A driver connected through Ray client (`ray://`), with the GPU libraries made unimportable, runs
  a grid: the driver only sends specs and receives results.

Each node runs `ray start --block` in its own session (start_new_session) and its own temp dir, so
the test finds, stops and kills exactly the processes it started (never `ray stop`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from tests.ports import free_ports

pytest.importorskip("ray")

# GCS declares a node dead after health_check_failure_threshold missed checks, one every
# health_check_period_ms (15 s by default); the test shortens that for the head it starts.
NODE_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}
GPU_LIBRARIES = ("torch", "transformers", "vllm", "bitsandbytes", "accelerate")


# Every port a node opens, chosen free, so nodes (ours and other people's) never collide; a head
# opens three more.
NODE_PORTS = (
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)
HEAD_PORTS = ("--port", "--dashboard-port", "--ray-client-server-port")


def node_ports(flags: tuple[str, ...] = NODE_PORTS) -> dict[str, int]:
    """A distinct free port for each flag."""
    return dict(zip(flags, free_ports(len(flags)), strict=True))


def session_members(sid: int) -> list[int]:
    """Processes of the session `sid`: a node's `ray start --block` and all it spawned (Ray
    workers get their own process group but stay in the session)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


@dataclass
class RayNode:
    proc: subprocess.Popen
    temp_dir: str
    log: Path

    def kill(self) -> None:
        """SIGKILL every process of the node, as if its machine died."""
        for pid in session_members(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(30)

    def node_id(self) -> str:
        """The Ray node id, from the command line of this node's raylet."""
        for pid in session_members(self.proc.pid):
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            except OSError:
                continue
            for arg in args:
                if arg.startswith("--node_id="):
                    return arg.split("=", 1)[1]
        raise AssertionError(f"no raylet found for the node\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # `ray start --block` stops its processes on SIGTERM
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 15
        while session_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        self.kill()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def start_node(
    args: list[str], log: Path, gpus: int = 1, ports: dict[str, int] | None = None
) -> RayNode:
    # A short temp dir: Ray puts unix sockets under it (path length limit).
    temp_dir = tempfile.mkdtemp(prefix="rg-ray-")
    cmd = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--block",
        "--num-cpus=2",
        f"--num-gpus={gpus}",
        "--object-store-memory=200000000",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
        *(f"{flag}={port}" for flag, port in (ports or node_ports()).items()),
        *args,
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd,
            env={**os.environ, **NODE_ENV},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return RayNode(proc, temp_dir, log)


def cluster_nodes(address: str) -> int:
    """Alive nodes, from `ray status` (0 while the head is not up)."""
    out = subprocess.run(
        [str(Path(sys.executable).with_name("ray")), "status", f"--address={address}"],
        env={**os.environ, **NODE_ENV},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0 or "Active:" not in out.stdout:
        return 0
    active = out.stdout.split("Active:", 1)[1].split("Pending:", 1)[0]
    return sum(1 for line in active.splitlines() if "node_" in line)


def wait_for(
    predicate, what: str, nodes: list[RayNode], timeout: float = 120, poll_s: float = 1.0
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for node in nodes:
            assert node.proc.poll() is None, f"{what}: a node exited\n{node.log.read_text()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll_s)


@pytest.fixture
def head(tmp_path):
    """A Ray head with one fake GPU; yields (node, GCS address, Ray client address)."""
    yield from started_head(tmp_path, gpus=1)


def started_head(tmp_path: Path, gpus: int):
    ports = node_ports(NODE_PORTS + HEAD_PORTS)
    node = start_node(
        ["--head", "--node-ip-address=127.0.0.1", "--include-dashboard=false"],
        tmp_path / "head.log",
        gpus,
        ports,
    )
    client_port = ports["--ray-client-server-port"]
    try:
        address = f"127.0.0.1:{ports['--port']}"
        wait_for(lambda: cluster_nodes(address) >= 1, "the head", [node])
        yield node, address, f"ray://127.0.0.1:{client_port}"
    finally:
        node.stop()


def reprogrid(args: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env={**env, **NODE_ENV},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **kwargs,
    )


def finish(proc: subprocess.Popen, timeout: float = 300, ok: bool = True) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"timed out: {proc.args}\n{out}")
    if ok:
        assert proc.returncode == 0, out
    return out


def settings(store: Path) -> pd.DataFrame:
    empty = pd.DataFrame(columns=["setting_key", "status", "node_id", "precision"])
    try:
        frame = pd.read_parquet(store / "settings")
    except (OSError, ValueError):
        return empty
    # Before the first shard lands the folder may hold only a temporary file: no columns.
    return frame if "node_id" in frame.columns else empty


# 2 engine units (precisions) of the tiny model x 2 settings x 8 problems, a chunk per problem.
GRID = [
    "model=tiny",
    "benchmark.limit=8",
    "max_length=384",
    "template=own,instruct",
    "grid.precision=fp32,bf16",
    "checkpoint.every_samples=1",
]
PROGRAMS = ["setting_key", "task_id", "sample_index", "program", "output_token_ids"]


def programs(store: Path) -> pd.DataFrame:
    frame = pd.read_parquet(store / "generations", columns=PROGRAMS)
    frame["output_token_ids"] = frame["output_token_ids"].map(list)
    return frame.sort_values(PROGRAMS[:3]).reset_index(drop=True)


def early_in_unit_on(store: Path, node_id: str) -> bool:
    """A unit that generated a chunk on `node_id` has generated at most 4 of its 16 samples
    (the rest of the run lasts long enough for `status` to be asked while it goes on)."""
    frame = settings(store)
    if "node_ids" not in frame.columns:
        return False
    on_node = frame[frame.node_ids.map(lambda ids: ids is not None and node_id in list(ids))]
    if on_node.empty:
        return False
    unit = frame[frame.engine_key.isin(on_node.engine_key)]
    try:
        done = pd.read_parquet(store / "generations", columns=["setting_key"])
    except (OSError, ValueError):
        return False
    return 0 < done.setting_key.isin(unit.setting_key).sum() <= 4


def shown_faults(store: Path, env: dict[str, str]) -> dict:
    out = finish(reprogrid(["status", "--store", str(store), "--json"], env), timeout=120)
    return json.loads(out)["run"]


def test_units_spread_over_two_nodes_and_a_killed_node_is_resumed(env, tmp_path):
    """Both units start at once, one on each worker (the head has no GPU); the worker of one is
    killed mid-unit. Ray restarts its engine on the worker left once that one's GPU is free
    (cluster.max_retries), the chunks it held go back to the queue, and the run ends
    `finished` with every setting complete once."""
    head_gen = started_head(tmp_path, gpus=0)
    head_node, address, _ = next(head_gen)
    nodes, workers = [head_node], []
    try:
        for name in ("worker-a", "worker-b"):  # one at a time: a loaded GCS times a node out
            args = [f"--address={address}", "--node-ip-address=127.0.0.1"]
            workers.append(start_node(args, tmp_path / f"{name}.log"))
            nodes.append(workers[-1])
            wait_for(lambda: cluster_nodes(address) >= len(nodes), f"{name} to join", nodes)
        survivor, doomed = workers
        store = tmp_path / "store"
        command = ["run", *GRID, f"cluster.address={address}", f"store={store}"]
        first = reprogrid(command, env)
        survivor_id, doomed_id = survivor.node_id(), doomed.node_id()

        def doomed_mid_unit() -> bool:
            assert first.poll() is None, first.communicate()[0]
            return early_in_unit_on(store, doomed_id)

        wait_for(doomed_mid_unit, "a unit on the doomed worker", nodes, timeout=300, poll_s=0.3)
        doomed.kill()
        nodes.remove(doomed)
        # `status` says it while the run goes on: the node lost, the engine's chunks requeued
        shown: dict = {}

        def faults_shown() -> bool:
            shown.update(shown_faults(store, env))
            kinds = {f["kind"] for f in shown["faults"]}
            return "node_lost" in kinds and len(kinds) >= 2

        try:
            wait_for(faults_shown, "status to show the faults", nodes, timeout=120, poll_s=1.0)
        except AssertionError:
            os.killpg(first.pid, signal.SIGKILL)
            pytest.fail(f"status showed {shown}\nthe run said:\n{first.communicate()[0]}")
        assert first.poll() is None or shown["status"] == "finished", shown
        lost = [f for f in shown["faults"] if f["kind"] == "node_lost"]
        assert [f["what"] for f in lost] == [doomed_id]
        requeued = [f for f in shown["faults"] if f["kind"] != "node_lost"]
        assert sum(f["requeued_chunks"] for f in requeued) >= 1, shown

        out = finish(first, timeout=600)
        final = settings(store)
        assert len(final) == 4 and set(final.status) == {"complete"}, final
        scores = pd.read_parquet(store / "scores")
        assert len(scores) == 4 and scores.setting_key.is_unique
        generated = programs(store)
        assert len(generated) == 4 * 8
        assert not generated.duplicated(PROGRAMS[:3]).any()
        # the units ran on both workers; the killed one's unit was finished on the other
        nodes_used = {n for ids in final.node_ids for n in ids}
        assert nodes_used == {survivor_id, doomed_id}, out
        runs = pd.read_parquet(store / "runs")
        assert list(runs.status) == ["finished"], out
        # the programs of an uninterrupted run on the same cluster
        fresh = tmp_path / "fresh"
        finish(reprogrid(["run", *GRID, f"cluster.address={address}", f"store={fresh}"], env))
        pd.testing.assert_frame_equal(generated, programs(fresh))
    finally:
        for worker in workers:
            worker.stop()
        head_gen.close()


BLOCKER = """\
import pathlib
pathlib.Path(__file__).parents[1].joinpath("imported-" + __name__).touch()
raise ImportError(__name__ + " is not installed on this driver")
"""


def test_a_ray_client_driver_needs_no_gpu_library(env, head, tmp_path):
    """The driver on a laptop: `ray://` to the cluster, GPU libraries absent (stubs that fail
    and leave a mark when imported)."""
    _, _, client_address = head
    stubs = tmp_path / "stubs"
    for name in GPU_LIBRARIES:
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text(BLOCKER)
    driver_env = {**env, "PYTHONPATH": os.pathsep.join([str(stubs), env.get("PYTHONPATH", "")])}
    store = tmp_path / "store"
    grid = ["backend=fake", "model=tiny", "benchmark.limit=3", "template=own,instruct"]
    out = finish(
        reprogrid(["run", *grid, f"cluster.address={client_address}", f"store={store}"], driver_env)
    )
    assert "generated 2, executed 2, failed 0" in out
    finish(reprogrid(["status", "--store", str(store)], driver_env))
    finish(reprogrid(["report", "--store", str(store), "--format", "md,csv"], driver_env))
    assert sorted(p.name for p in stubs.glob("imported-*")) == []
    frame = settings(store)
    assert set(frame.status) == {"complete"} and frame.node_id.notna().all()
