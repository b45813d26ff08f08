"""docker/slurm/reprogrid.sbatch run under bash with stub `srun`, `scontrol`, `ray` and
`reprogrid` on PATH (tests/unit/slurm_stubs/): the command it finally runs, the Ray nodes it
starts, the requeue when SIGTERM reaches the batch shell, and the bounded waits for the head and
for every GPU to join (a distinct exit code, nothing run)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docker" / "slurm" / "reprogrid.sbatch"
STUBS = Path(__file__).resolve().parent / "slurm_stubs"
JOB_ID = 4242
ADDRESS = f"10.1.2.3:{6379 + JOB_ID % 1000}"
EXIT_NO_CLUSTER = 75
HANG_S = 60  # a script still running after this is hung (no timing is asserted)


@pytest.fixture
def job(tmp_path):
    """The environment of a batch shell in a two-node allocation of 4 GPUs and 32 CPUs each."""
    bin_dir = tmp_path / "bin"
    shutil.copytree(STUBS, bin_dir)
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text("# the stubs are on PATH already\n")
    log = tmp_path / "calls.log"
    log.touch()
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "REPROGRID_VENV": str(venv),
        "SLURM_JOB_ID": str(JOB_ID),
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "SLURM_GPUS_ON_NODE": "4",
        "SLURM_CPUS_PER_TASK": "32",
        "REPROGRID_POLL_S": "0.1",
        "STUB_LOG": str(log),
        "STUB_RAY": "up",
        "STUB_DRIVER": "finish",
    }
    return env, log


def run(env: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    args = ["bash", str(SCRIPT), "experiment=paper-table2", "store=s3://bucket/study"]
    return subprocess.run(
        args, env={**env, **extra}, capture_output=True, text=True, timeout=HANG_S
    )


def calls(log: Path, program: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith(program + " ")]


def test_it_starts_a_head_and_a_node_then_runs_the_driver_on_them(job):
    env, log = job
    done = run(env)
    assert done.returncode == 0, done.stderr
    assert calls(log, "reprogrid") == [
        f"reprogrid run cluster=ray cluster.address={ADDRESS} cluster.exec_resource=reprogrid_exec"
        " experiment=paper-table2 store=s3://bucket/study"
    ]
    # The head's step is logged before the stub head answers, the node's step is started only
    # then (the stub ray counts the steps begun): the order is the script's.
    starts = [c for c in calls(log, "srun") if "ray start" in c]
    assert len(starts) == 2 and "--head" in starts[0] and "-w node-a" in starts[0]
    assert f"--address={ADDRESS}" in starts[1] and "-w node-b" in starts[1]
    for start in starts:  # one CPU per GPU for the engines, the other cores execute programs
        assert "--num-cpus=4 --num-gpus=4" in start
        assert '--resources={"reprogrid_exec": 28}' in start
    assert not calls(log, "scontrol")  # a finished run is not requeued


def test_the_driver_command_line_is_a_valid_run():
    from orchestrator.run.config.load import load_run_config

    config = load_run_config(
        ["cluster=ray", f"cluster.address={ADDRESS}", "cluster.exec_resource=reprogrid_exec"]
        + ["experiment=paper-table2", "store=s3://bucket/study"]
    )
    assert config.cluster.address == ADDRESS
    assert config.cluster.exec_resource == "reprogrid_exec"


def test_sigterm_to_the_batch_shell_stops_the_driver_cleanly_and_requeues_the_job(job):
    env, log = job
    args = ["bash", str(SCRIPT), "experiment=paper-table2", "store=s3://bucket/study"]
    shell = subprocess.Popen(args, env={**env, "STUB_DRIVER": "run"}, text=True)
    running = Path(f"{log}.running")
    deadline = time.monotonic() + HANG_S
    while not running.exists() and shell.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running.exists(), "the driver never started"
    shell.send_signal(signal.SIGTERM)  # what --signal=B:TERM@120 or a preemption sends
    assert shell.wait(timeout=HANG_S) == 143
    assert "reprogrid: SIGTERM" in log.read_text()  # the shell passed it on to the driver
    assert calls(log, "scontrol") == [f"scontrol requeue {JOB_ID}"]


def test_a_driver_that_fails_is_not_requeued(job):
    env, log = job
    done = run(env, STUB_DRIVER="fail")
    assert done.returncode == 2
    assert not calls(log, "scontrol")


@pytest.mark.parametrize(
    ("ray", "said"),
    [
        ("down", f"the Ray head on node-a ({ADDRESS}) did not answer within 1 s"),
        ("partial", "not all 8 GPUs of 2 nodes joined within 1 s"),
    ],
    ids=["head-never-answers", "a-node-never-joins"],
)
def test_a_cluster_that_never_comes_up_ends_the_job_with_its_own_exit_code(job, ray, said):
    env, log = job
    done = run(env, STUB_RAY=ray, REPROGRID_JOIN_TIMEOUT_S="1")
    assert done.returncode == EXIT_NO_CLUSTER
    assert said in done.stderr and "REPROGRID_JOIN_TIMEOUT_S" in done.stderr
    assert not calls(log, "reprogrid")  # nothing was run
    assert not calls(log, "scontrol")  # and the job is not requeued into the same wait
