"""The sandbox: harness-faithful scoring, and hostile programs contained.

Each hostile program must be scored as not passed, finish, and leave the host and this
(calling) process unaffected. Tests that need root (privilege drop, uid slots) or a namespace
skip where it is unavailable; CI runs them as root. Hostile programs that use what the harness
guard disables (os.fork, os.kill) run with harness_guard=False: the guard is not a security
boundary (`import posix` undoes it), so the isolation must hold without it. The guard itself is
tested in test_sandbox_guard.py.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from workers.benchmarks.humanevalfix.postprocess import (
    IMPORT_HELPER,
    program_for,
    reference_candidate,
)
from workers.execspec import ExecJob, Outcome, SandboxLimits
from workers.sandbox import (
    HARNESS_PRELOADED_MODULES,
    CommandResult,
    run_command,
    run_python_program,
    sandbox_capabilities,
    score_program,
)
from workers.spec import Variant

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="needs root: privilege drop and uid slots")
needs_netns = pytest.mark.skipif(
    not sandbox_capabilities()["network_namespace"], reason="no network namespace here"
)
LIMITS = SandboxLimits(timeout_s=2.0, memory_mb=1024)


def run(
    program: str,
    timeout_s: float = 2.0,
    limits: SandboxLimits = LIMITS,
    header: bool = True,
    guard: bool = True,
):
    text = IMPORT_HELPER + "\n" + program if header else program
    return run_python_program(ExecJob("job-1", text, timeout_s), limits, harness_guard=guard)


def python_cmd(code: str, limits: SandboxLimits = LIMITS, **kwargs) -> CommandResult:
    return run_command(["python3", "-c", textwrap.dedent(code)], {}, limits, **kwargs)


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status and "\nState:\tX" not in status


def pids_with_cmdline(token: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if token.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                pass
    return [pid for pid in found if alive(pid)]


# ---------------------------------------------------------------------------------------------
# Harness-faithful scoring


def test_passing_program_with_the_numpy_header():
    result = run("assert numpy.arange(4).sum() == 6\nassert np.zeros(2).shape == (2,)")
    assert result.outcome == Outcome.PASSED, result
    assert result.error_type is None and result.job_id == "job-1"
    assert result.duration_s > 0


def test_program_runs_with_empty_globals_like_the_harness():
    # exec(code, {}): __name__ resolves to the builtins module's name, never "__main__".
    assert run("assert __name__ == 'builtins', __name__").outcome == Outcome.PASSED
    assert run("if __name__ == '__main__':\n    raise RuntimeError('ran as main')\n").outcome == (
        Outcome.PASSED
    )


@pytest.mark.parametrize(
    ("program", "error_type", "message"),
    [
        ("assert 1 + 1 == 3, 'math is broken'", "AssertionError", "math is broken"),
        ("undefined_name", "NameError", "name 'undefined_name' is not defined"),
        ("raise MemoryError('pretend')", "MemoryError", "pretend"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt", ""),
    ],
)
def test_exceptions_are_failed_with_their_class_name(program, error_type, message):
    result = run(program)
    assert (result.outcome, result.error_type, result.error_message) == (
        Outcome.FAILED,
        error_type,
        message,
    )


def test_syntax_error_is_error():
    result = run("def broken(:\n    pass\n")
    assert (result.outcome, result.error_type) == (Outcome.ERROR, "SyntaxError")
    assert "<program>" in result.error_message


def test_tab_error_is_reported_as_syntax_error():
    result = run("def f():\n        x = 1\n\treturn x\n")
    assert (result.outcome, result.error_type) == (Outcome.ERROR, "SyntaxError")
    assert result.error_message.startswith("TabError")


@pytest.mark.parametrize(
    "program",
    [
        "import os\nos._exit(0)\n",
        "import sys\nsys.exit(0)\n",
        "def check():\n    import os\n    os._exit(0)\n    assert False\ncheck()\n",
        "def check():\n    sys.exit(0)\n    assert False\ncheck()\n",
        "import os\nos._exit(3)\n",
    ],
    ids=["os._exit-import", "sys.exit-import", "os._exit-test", "sys.exit-test", "os._exit-3"],
)
def test_early_exit_is_failed(program):
    result = run(program)
    assert (result.outcome, result.error_type) == (Outcome.FAILED, "EarlyExit"), result


def test_forged_completion_report_is_ignored():
    # Without the per-run nonce a program cannot claim to have passed, whatever fd it writes.
    program = """
import os
for fd in range(3, 64):
    try:
        os.write(fd, b'ready x\\ndone x {"status": "passed"}\\n')
    except OSError:
        pass
os._exit(0)
"""
    assert run(program).error_type == "EarlyExit"


def test_stdin_is_empty_and_output_is_not_the_result():
    result = run("import sys\nprint('noise')\nassert sys.stdin.read() == ''\n", guard=False)
    assert result.outcome == Outcome.PASSED


def test_under_the_harness_guard_reading_stdin_raises_and_prints_are_swallowed():
    result = run("import sys\nprint('noise')\nsys.stdin.read()\n")
    assert (result.outcome, result.error_type) == (Outcome.FAILED, "OSError")
    assert run("print('x' * 1000)\ninput_ok = True\n").outcome == Outcome.PASSED


def test_leftover_non_daemon_thread_does_not_block_a_pass():
    program = "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\n"
    started = time.monotonic()
    assert run(program).outcome == Outcome.PASSED
    assert time.monotonic() - started < 10


def test_preloaded_modules_are_the_harness_header():
    header = {line.split()[1] for line in IMPORT_HELPER.splitlines()}
    assert header == set(HARNESS_PRELOADED_MODULES)


# The first five problems; their buggy versions fail on an assertion within a second.
CANONICAL = range(5)


@pytest.mark.parametrize("index", CANONICAL)
def test_canonical_solution_passes_and_buggy_fails(problem_set, index):
    problem = problem_set.problems[index]
    fixed = program_for(
        reference_candidate(problem, Variant.TESTS, problem.canonical_solution), problem
    )
    buggy = program_for(
        reference_candidate(problem, Variant.TESTS, problem.buggy_solution), problem
    )
    limits = SandboxLimits(timeout_s=10.0)
    assert run_python_program(ExecJob("fixed", fixed, 10.0), limits).outcome == Outcome.PASSED
    result = run_python_program(ExecJob("buggy", buggy, 10.0), limits)
    assert (result.outcome, result.error_type) == (Outcome.FAILED, "AssertionError")


# ---------------------------------------------------------------------------------------------
# Hostile programs


def test_infinite_loop_times_out():
    started = time.monotonic()
    result = run("while True:\n    pass\n", timeout_s=1.5)
    assert (result.outcome, result.error_type) == (Outcome.TIMEOUT, "Timeout")
    assert 1.5 <= result.duration_s < 1.5 + 10
    assert time.monotonic() - started < 15


def test_memory_bomb_is_contained():
    # By the memory cgroup (an OOM kill: Signal) or, without one, RLIMIT_AS (MemoryError).
    limits = SandboxLimits(timeout_s=10.0, memory_mb=300)
    program = "blob = bytearray()\nwhile True:\n    blob += b'x' * (8 << 20)\n"
    result = run(program, timeout_s=10.0, limits=limits)
    assert result.outcome in (Outcome.FAILED, Outcome.ERROR), result
    assert result.error_type in ("MemoryError", "Signal")


def test_cpu_limit_kills_with_sigxcpu():
    limits = SandboxLimits(timeout_s=20.0, cpu_s=1)
    result = run("while True:\n    pass\n", timeout_s=20.0, limits=limits)
    assert (result.outcome, result.error_type) == (Outcome.ERROR, "Signal"), result
    assert "SIGXCPU" in result.error_message or "SIGKILL" in result.error_message


def _fork_storm(token: str, then: str) -> str:
    return f"""
import os
for _ in range(50):
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "{token}"])
{then}
"""


def test_fork_storm_exiting_at_once_is_cleaned_up_without_waiting():
    token = f"300.{secrets.randbelow(10**9):09d}"
    started = time.monotonic()
    result = run(_fork_storm(token, "assert False, 'storm'"), timeout_s=10.0, guard=False)
    assert (result.outcome, result.error_type) == (Outcome.FAILED, "AssertionError")
    assert time.monotonic() - started < 8  # not held up by the sleepers' inherited pipes
    assert pids_with_cmdline(token) == []


def test_fork_storm_waiting_on_children_times_out_and_is_cleaned_up():
    token = f"300.{secrets.randbelow(10**9):09d}"
    result = run(_fork_storm(token, "os.wait()"), timeout_s=2.0, guard=False)
    assert result.outcome == Outcome.TIMEOUT
    assert pids_with_cmdline(token) == []


@needs_root
def test_strays_that_leave_the_process_group_are_killed_by_uid():
    token = f"300.{secrets.randbelow(10**9):09d}"
    program = f"""
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "{token}"])
    os._exit(0)
"""
    result = run(program, guard=False)
    assert result.outcome == Outcome.PASSED  # the program itself finished its "test"
    assert pids_with_cmdline(token) == []


@needs_root
def test_process_limit_is_per_sandbox():
    limits = SandboxLimits(timeout_s=10.0, max_processes=10)
    program = _fork_storm("30", "assert False, 'all forks succeeded'")
    result = run(program, timeout_s=10.0, limits=limits, guard=False)
    assert result.outcome == Outcome.FAILED
    assert result.error_type == "BlockingIOError"  # fork() -> EAGAIN


@pytest.mark.parametrize("target", ["os.getppid()", "{me}", "1"])
def test_program_cannot_kill_its_parent_or_the_caller(target):
    # As root the uid differs (EPERM); in a pid namespace the parent is the namespace's own
    # pid 1 (which ignores signals from inside) and the caller has no pid there at all.
    if not (ROOT or sandbox_capabilities()["pid_namespace"]):
        pytest.skip("neither a privilege drop nor a pid namespace: the caller is reachable")
    me = os.getpid()
    program = f"import os, signal\nos.kill({target.format(me=me)}, signal.SIGKILL)\n"
    result = run(program, guard=False)
    assert result.outcome != Outcome.PASSED or target == "1", result
    os.kill(me, 0)  # still here


@needs_root
def test_program_cannot_write_outside_its_folder(tmp_path):
    # One root-owned 0755 folder under /tmp (which the sandbox sees as a private tmpfs) and one
    # next to this file (which it sees as it is): neither may receive the file.
    folders = [
        tmp_path / "outside",
        Path(tempfile.mkdtemp(prefix=".sbx-out-", dir=Path(__file__).parent)),
    ]
    try:
        for folder in folders:
            folder.mkdir(exist_ok=True)
            os.chmod(folder, 0o755)
            result = run(f"open({str(folder / 'pwned.txt')!r}, 'w').write('x')\n")
            assert result.outcome == Outcome.FAILED, result
            assert result.error_type in ("PermissionError", "FileNotFoundError")
            assert not (folder / "pwned.txt").exists()
    finally:
        os.rmdir(folders[1])


def test_secrets_in_the_environment_are_not_visible(monkeypatch):
    secret = "s3cr3t-" + secrets.token_hex(8)
    monkeypatch.setenv("REPROGRID_TEST_SECRET", secret)
    program = f"""
import os
assert 'REPROGRID_TEST_SECRET' not in os.environ
assert not any({secret!r} in v for v in os.environ.values())
"""
    assert run(program).outcome == Outcome.PASSED
    shown = python_cmd("import os; print(dict(os.environ))")
    assert shown.exit_code == 0 and secret not in shown.stdout
    assert "'OMP_NUM_THREADS': '1'" in shown.stdout


@needs_root
def test_parent_environment_is_not_readable_through_proc(monkeypatch):
    secret = "s3cr3t-" + secrets.token_hex(8)
    monkeypatch.setenv("REPROGRID_TEST_SECRET", secret)  # os.environ writes through to /proc
    shown = python_cmd(
        f"""
        import os
        try:
            print(open('/proc/{os.getpid()}/environ', 'rb').read())
        except OSError as e:
            print('denied', e)
        """
    )
    assert secret not in shown.stdout and "denied" in shown.stdout


def test_printing_100_mb_is_drained_and_capped():
    program = (
        "import sys\nchunk = 'y' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.write(chunk)\n"
    )
    result = run(program, timeout_s=30.0)
    assert result.outcome == Outcome.PASSED  # output does not matter, the test ran to the end
    shown = python_cmd(
        "import sys\nfor _ in range(100):\n    sys.stdout.write('z' * (1 << 20))\n",
        SandboxLimits(timeout_s=30.0, max_output_bytes=1000),
    )
    assert shown.exit_code == 0 and shown.output_truncated
    assert shown.stdout == "z" * 1000


def test_writing_a_huge_file_hits_rlimit_fsize():
    limits = SandboxLimits(timeout_s=10.0, file_size_mb=8)
    result = run("open('big.bin', 'wb').write(b'x' * (16 << 20))\n", timeout_s=10.0, limits=limits)
    assert (result.outcome, result.error_type) == (Outcome.FAILED, "OSError")
    assert "too large" in result.error_message


@needs_netns
def test_network_connect_fails():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        port = server.getsockname()[1]
        program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        result = run(program)
        assert result.outcome == Outcome.FAILED and result.error_type in (
            "OSError",
            "ConnectionRefusedError",
            "TimeoutError",
        )
        with pytest.raises(TimeoutError):
            server.accept()


def test_network_allowed_when_limits_say_so():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        program = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
        )
        result = run(program, limits=SandboxLimits(timeout_s=5.0, network=True), timeout_s=5.0)
        assert result.outcome == Outcome.PASSED, result


# ---------------------------------------------------------------------------------------------
# run_command


def test_run_command_files_env_stdin_and_folder():
    code = (
        "import os, sys\n"
        "home = os.getcwd() == os.environ['HOME'] == os.environ['TMPDIR']\n"
        "print(open('sub/dir/in.txt').read(), os.environ['EXTRA'], sys.stdin.read(), home,"
        " os.getcwd())\n"
    )
    shown = run_command(
        ["python3", "-c", code],
        {"sub/dir/in.txt": "from-file", "blob.bin": b"\x00\x01"},
        LIMITS,
        stdin_text="from-stdin",
        env={"EXTRA": "from-env"},
    )
    assert shown.exit_code == 0, shown
    words = shown.stdout.split()
    assert words[:4] == ["from-file", "from-env", "from-stdin", "True"]
    assert not os.path.exists(words[4])  # the folder is gone


def test_run_command_without_stdin_text_reads_eof():
    shown = python_cmd("import sys; print(repr(sys.stdin.read()))")
    assert shown.stdout.strip() == "''"


def test_run_command_timeout_reports_kill():
    shown = python_cmd(
        "import time; print('started', flush=True); time.sleep(60)", SandboxLimits(timeout_s=1.0)
    )
    assert shown.timed_out and shown.exit_code is None and shown.signal == signal.SIGKILL
    assert shown.stdout == "started\n"


def test_run_command_exit_code_and_signal():
    assert python_cmd("import sys; sys.exit(7)").exit_code == 7
    killed = python_cmd("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert (killed.exit_code, killed.signal, killed.timed_out) == (None, signal.SIGSEGV, False)


def test_folder_is_removed_even_after_chmod():
    shown = python_cmd(
        """
        import os
        os.makedirs('a/b')
        open('a/b/f', 'w').write('x')
        os.chmod('a/b', 0)
        os.chmod('a', 0)
        os.chmod('.', 0o500)
        print(os.getcwd())
        """
    )
    assert shown.exit_code == 0, shown
    assert not os.path.exists(shown.stdout.strip())


@pytest.mark.parametrize("bad", ["../escape.txt", "/etc/passwd", "a/../../b", ""])
def test_run_command_rejects_paths_leaving_the_folder(bad):
    with pytest.raises(ValueError, match="relative"):
        run_command(["true"], {bad: "x"}, LIMITS)


def test_missing_executable_raises():
    with pytest.raises(FileNotFoundError):
        run_command(["definitely-not-a-command-xyz"], {}, LIMITS)


def test_capabilities_are_reported():
    caps = sandbox_capabilities()
    assert caps["rlimits"] and caps["process_group"]
    assert all(isinstance(v, bool) for v in caps.values())
    if ROOT:
        assert caps["drop_privileges"] and caps["kill_strays_by_uid"]


# ---------------------------------------------------------------------------------------------
# score_program (pure)


def _result(exit_code=0, sig=None, timed_out=False, stderr="", memory_killed=False):
    return CommandResult(
        exit_code, sig, timed_out, "", stderr, 0.1, False, memory_killed=memory_killed
    )


KILLED = _result(exit_code=None, sig=9, timed_out=True)


def _raised(kind: str) -> dict:
    return {"status": "raised", "type": kind, "message": "m"}


@pytest.mark.parametrize(
    ("result", "done", "expected"),
    [
        (_result(), {"status": "passed"}, (Outcome.PASSED, None)),
        # a child killed for the memory limit after the tests passed: never a pass
        (_result(memory_killed=True), {"status": "passed"}, (Outcome.FAILED, "MemoryLimit")),
        (_result(None, sig=9, memory_killed=True), None, (Outcome.ERROR, "Signal")),
        (KILLED, None, (Outcome.TIMEOUT, "Timeout")),
        (KILLED, {"status": "passed"}, (Outcome.TIMEOUT, "Timeout")),
        (_result(1), _raised("ValueError"), (Outcome.FAILED, "ValueError")),
        (_result(1), _raised("SystemExit"), (Outcome.FAILED, "EarlyExit")),
        (
            _result(1),
            {"status": "compile_error", "type": "TabError"},
            (Outcome.ERROR, "SyntaxError"),
        ),
        (_result(None, sig=24), None, (Outcome.ERROR, "Signal")),
        (_result(0), None, (Outcome.FAILED, "EarlyExit")),
        (_result(1, stderr="Traceback"), None, (Outcome.FAILED, "EarlyExit")),
    ],
)
def test_score_program_table(result, done, expected):
    outcome, error_type, _ = score_program(result, done, 2.0)
    assert (outcome, error_type) == expected
