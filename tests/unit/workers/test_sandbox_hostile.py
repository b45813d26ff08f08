"""The hostile corpus of the isolation audit, through the real path (execute_jobs with the
harness guard, as the driver runs it), next to canonical controls in the same run.

Each hostile program *passes only if its attack worked*: it reads the answer key, another
store's generations, the checkout or host files, sees the host's processes, holds more memory
across its children than the program's limit, fills the disk past the work folder's quota, or
gains privileges. So each must be scored not passed, while the canonical fixes in the same
batch pass. The guard is no obstacle to an attacker (`import posix` has what it disables), so
these programs use posix directly. A driver killed mid-run must leave no process, no work
folder and (after the next start's sweep) no cgroup behind.

Properties the host does not give are skipped with the level it reports; CI runs as root,
where the level is "full" and nothing skips.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from workers.benchmarks.humanevalfix.postprocess import program_for, reference_candidate
from workers.execspec import ExecJob, IsolationLevel, Outcome, SandboxLimits
from workers.execution import execute_jobs
from workers.sandbox import run_command, sandbox_isolation
from workers.sandbox.cgroups import cgroup_host
from workers.sandbox.pool import sweep_stale_state
from workers.sandbox.slots import release_slot, try_slot
from workers.spec import Variant

LIMITS = SandboxLimits(timeout_s=10.0, memory_mb=512, disk_mb=32)
REPORT = sandbox_isolation(LIMITS)
needs_view = pytest.mark.skipif(
    REPORT.level < IsolationLevel.NAMESPACES, reason=f"isolation here: {REPORT.level}"
)
needs_full = pytest.mark.skipif(
    REPORT.level < IsolationLevel.FULL, reason=f"isolation here: {REPORT.level}"
)
HERE = Path(__file__).resolve()


def hostile_programs(data_dir: Path, store: Path, home_file: Path) -> dict[str, str]:
    """name -> program text that passes only if the attack succeeds."""
    answer_key = data_dir / "humanevalpack-python.jsonl"
    return {
        "answer-key": f"""
import json
rows = [json.loads(line) for line in open({str(answer_key)!r})]
row = rows[0]
exec(row["declaration"] + row["canonical_solution"] + "\\n" + row["test"], {{}})
""",
        "other-store": f"assert open({str(store / 'generations.parquet')!r}, 'rb').read()\n",
        "checkout": f"assert 'hostile corpus' in open({str(HERE)!r}).read()\n",
        "home-folder": f"assert open({str(home_file)!r}).read()\n",
        "host-files": "assert open('/etc/os-release').read()\n",
        "host-accounts": "assert 'daemon:' in open('/etc/passwd').read()\n",
        "host-processes": f"""
import os
pids = {{p for p in os.listdir('/proc') if p.isdigit()}}
assert {str(os.getpid())!r} in pids or len(pids) > 3, pids
""",
        "five-children-over-the-memory-limit": """
import posix, select, time
r, w = posix.pipe()
for _ in range(5):
    if posix.fork() == 0:
        blob = b"x" * (150 << 20)  # touched: 150 MB resident per child, 750 MB in all
        posix.write(w, b"1")
        time.sleep(30)
        posix._exit(0)
posix.close(w)
held, end = b"", time.monotonic() + 8
while len(held) < 5 and select.select([r], [], [], max(0, end - time.monotonic()))[0]:
    chunk = posix.read(r, 8)
    if not chunk:
        break
    held += chunk
assert len(held) == 5, f"only {len(held)} children held their memory"
""",
        "disk-fill-past-the-quota": """
chunk = b"d" * (8 << 20)
for i in range(12):  # 96 MB in files of 8 MB, against a 32 MB work folder
    with open(f"fill-{i}.bin", "wb") as fh:
        fh.write(chunk)
""",
        "setuid-call": "import posix\nposix.setuid(0)\nassert posix.getuid() == 0\n",
        "capabilities-or-new-privileges": """
status = open('/proc/self/status').read().splitlines()
caps = [int(line.split()[1], 16) for line in status if line.startswith('Cap')]
assert any(caps) or 'NoNewPrivs:\\t0' in status, status
""",
    }


@pytest.fixture
def fake_store():
    """Another store's generations, outside /tmp (which the sandbox sees as its own tmpfs)."""
    folder = Path(tempfile.mkdtemp(prefix=".sbx-store-", dir=HERE.parent))
    (folder / "generations.parquet").write_bytes(b"PAR1 someone else's generations")
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def home_file():
    """A file in the home folder of the user running the driver."""
    path = Path.home() / f".reprogrid-sbx-{secrets.token_hex(6)}"
    path.write_text("the driver user's own file")
    yield path
    path.unlink()


@needs_full
def test_hostile_corpus_is_contained_next_to_passing_controls(
    problem_set, shared_data, fake_store, home_file
):
    controls = {
        f"control-{p.task_id}": program_for(
            reference_candidate(p, Variant.TESTS, p.canonical_solution), p
        )
        for p in problem_set.problems[:3]
    }
    hostile = hostile_programs(shared_data, fake_store, home_file)
    programs = {**controls, **hostile}
    jobs = [ExecJob(name, text, 10.0) for name, text in programs.items()]
    results = {r.job_id: r for r in execute_jobs(jobs, LIMITS, workers=2)}
    assert {n: results[n].outcome for n in controls} == dict.fromkeys(controls, Outcome.PASSED)
    escaped = {n: results[n] for n in hostile if results[n].outcome is Outcome.PASSED}
    assert escaped == {}
    assert {r.isolation for r in results.values()} == {"full"}
    # Each is stopped by the property meant to stop it, not by something incidental.
    why = {n: (results[n].error_type, results[n].error_message or "") for n in hostile}
    for name in ("answer-key", "other-store", "checkout", "home-folder", "host-files"):
        assert why[name][0] == "FileNotFoundError", (name, why[name])
    assert why["setuid-call"][0] == "PermissionError"
    assert "No space left on device" in why["disk-fill-past-the-quota"][1]
    memory = why["five-children-over-the-memory-limit"]
    # fewer than five children held their memory (AssertionError), the program itself was
    # killed (Signal), or it saw all five because the OOM killer took children that had already
    # reported (MemoryLimit: the limit killed a process of the program, so it is not a pass)
    assert memory[0] in ("AssertionError", "Signal", "MemoryLimit"), memory


@needs_view
def test_one_program_leaves_nothing_for_the_next():
    token = secrets.token_hex(8)
    leave = f"""
import posix
for folder in ("/tmp", "/var/tmp", "/dev/shm", "."):
    open(folder + "/left-{token}", "w").write("x")
"""
    find = f"""
import os
found = [f for f in ("/tmp", "/var/tmp", "/dev/shm", ".") if os.path.exists(f + "/left-{token}")]
assert found, "nothing of the previous program is visible"
"""
    first, second = execute_jobs(
        [ExecJob("leave", leave, 5.0), ExecJob("find", find, 5.0)], LIMITS, workers=1
    )
    assert first.outcome is Outcome.PASSED, first
    assert (second.outcome, second.error_type) == (Outcome.FAILED, "AssertionError")


# add_key and keyctl: (x86_64, aarch64) syscall numbers
_KEY_SYSCALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}


@needs_full
@pytest.mark.skipif(platform.machine() not in _KEY_SYSCALLS, reason="syscall numbers unknown")
def test_keyrings_carry_nothing_to_the_next_program():
    # The user keyrings outlive processes; the session keyring is inherited from the driver.
    add_key, keyctl = _KEY_SYSCALLS[platform.machine()]
    prelude = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    prelude += "libc.syscall.restype = ctypes.c_long\nRINGS = (-3, -4, -5)\n"
    leave = prelude + (
        "for ring in RINGS:\n"
        f"    key = libc.syscall({add_key}, b'user', b'sbx-left', b'x', 1, ctypes.c_int(ring))\n"
        "    assert key > 0\n"
    )
    find = prelude + (
        f"found = [r for r in RINGS if libc.syscall({keyctl}, 10, ctypes.c_int(r), b'user',"
        " b'sbx-left', 0) > 0]\nassert found, 'no key of the previous program'\n"
    )
    first, second = execute_jobs(
        [ExecJob("leave", leave, 5.0), ExecJob("find", find, 5.0)], LIMITS, workers=1
    )
    assert first.outcome is Outcome.PASSED, first
    assert (second.outcome, second.error_type) == (Outcome.FAILED, "AssertionError")


@needs_full
def test_a_setuid_root_binary_gains_nothing(tmp_path):
    os.chmod(tmp_path, 0o755)  # the sandbox uid must reach it, as on the host
    setuid_id = tmp_path / "bin" / "id"
    setuid_id.parent.mkdir()
    shutil.copy("/usr/bin/id", setuid_id)
    os.chown(setuid_id, 0, 0)
    os.chmod(setuid_id, 0o4755)
    shown = run_command([str(setuid_id), "-u"], {}, LIMITS)
    assert shown.exit_code == 0, shown
    assert shown.stdout.strip() != "0" and int(shown.stdout) >= 61000


def _procs(matches) -> list[int]:
    """Live processes whose command line (NUL-separated bytes) `matches`."""
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and matches(Path(f"/proc/{name}/cmdline").read_bytes()):
                state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(name))
        except OSError:
            pass
    return found


def _program(token: str) -> list[int]:
    return _procs(lambda cmdline: cmdline.startswith(token.encode() + b"\0"))


def _servers(driver: int) -> list[int]:
    return _procs(lambda cmdline: f'"owner": {driver}'.encode() in cmdline)


def _wait_for(condition, timeout_s: float = 30.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


DRIVER = """
import sys
from workers.sandbox import run_python_program
from workers.execspec import ExecJob, SandboxLimits
program = '''
import posix
open("workdir-" + {token!r}, "w").write("written by the program")
posix.execv("/bin/sleep", [{token!r}, "3600"])
'''
run_python_program(ExecJob("killed", program, 600.0), SandboxLimits(timeout_s=600.0))
"""


@needs_full
def test_nothing_survives_a_sigkill_of_the_driver():
    token = f"sbx-{secrets.token_hex(6)}"
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[3]))
    driver = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(DRIVER).format(token=token)], env=env
    )
    try:
        assert _wait_for(lambda: _program(token)), "the program never started"
        assert _servers(driver.pid), "no fork server of the driver found"
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        assert _wait_for(lambda: not _program(token)), "the program survived its driver"
        assert _wait_for(lambda: not _servers(driver.pid)), "its fork server survived"
    finally:
        if driver.poll() is None:
            driver.kill()
    # The work folder was a tmpfs of the run's mount namespace: nowhere on the host.
    assert list(Path(tempfile.gettempdir()).glob(f"reprogrid-sbx-*/workdir-{token}")) == []
    # The killed driver's slot cgroup is all it left; the next start's sweep removes it.
    sweep_stale_state(sandbox_isolation().facts)
    stale = []
    for base in cgroup_host().bases:
        for folder in Path(base).glob("slot-*"):
            slot = try_slot(int(folder.name.removeprefix("slot-")))
            if slot is not None:  # nobody holds it: it should have been swept
                stale.append(folder)
                release_slot(slot)
    assert stale == []


def test_the_level_and_facts_are_json_native():
    level, facts = sandbox_isolation(LIMITS)
    assert level is IsolationLevel(facts["level"])
    assert json.loads(json.dumps(facts)) == facts
    if os.geteuid() == 0:
        assert level is IsolationLevel.FULL, facts["missing"]
