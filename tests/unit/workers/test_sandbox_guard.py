"""The harness guard in run_python_program: what the metric's `reliability_guard()` disables
fails here as it fails in the harness, and everything the harness header needs still works."""

from __future__ import annotations

import pytest

from workers.benchmarks.humanevalfix.postprocess import (
    IMPORT_HELPER,
    program_for,
    reference_candidate,
)
from workers.execspec import ExecJob, Outcome, SandboxLimits
from workers.sandbox import HARNESS_METRIC_MODULES, run_python_program
from workers.spec import Variant

LIMITS = SandboxLimits(timeout_s=5.0, memory_mb=1024)
NOT_CALLABLE = "'NoneType' object is not callable"  # the harness's "failed: <this>"


def run(program: str, timeout_s: float = 5.0, guard: bool = True):
    job = ExecJob("guard-1", IMPORT_HELPER + "\n" + program, timeout_s)
    return run_python_program(job, LIMITS, harness_guard=guard)


def test_removing_a_file_in_the_working_folder_fails_as_in_the_harness():
    program = "import os\nopen('scratch.txt', 'w').write('x')\nos.remove('scratch.txt')\n"
    result = run(program)
    assert (result.outcome, result.error_type, result.error_message) == (
        Outcome.FAILED,
        "TypeError",
        NOT_CALLABLE,
    )


def test_without_the_guard_the_same_program_passes():
    program = "import os\nopen('scratch.txt', 'w').write('x')\nos.remove('scratch.txt')\n"
    assert run(program, guard=False).outcome == Outcome.PASSED


@pytest.mark.parametrize("call", ["exit(0)", "quit()", "exit()"])
def test_exit_builtins_are_disabled(call):
    result = run(f"def check():\n    {call}\ncheck()\n")
    assert (result.outcome, result.error_type, result.error_message) == (
        Outcome.FAILED,
        "TypeError",
        NOT_CALLABLE,
    )


DISABLED_CALLS = {
    "shutil.rmtree": "import shutil, os\nos.mkdir('d')\nshutil.rmtree('d')\n",
    "shutil.move": "import shutil\nopen('a', 'w').close()\nshutil.move('a', 'b')\n",
    "subprocess.Popen": "import subprocess\nsubprocess.run(['true'])\n",
    "os.kill": "import os\nos.kill(os.getpid(), 0)\n",
    "os.system": "import os\nos.system('true')\n",
    "os.getcwd": "import os\nos.getcwd()\n",
    "os.chdir": "import os\nos.chdir('.')\n",
    "os.rename": "import os\nopen('a', 'w').close()\nos.rename('a', 'b')\n",
    "os.putenv": "import os\nos.environ['X'] = '1'\n",  # os.environ writes through putenv
    "help": "help(len)\n",
}


@pytest.mark.parametrize("program", DISABLED_CALLS.values(), ids=DISABLED_CALLS.keys())
def test_disabled_functions_raise_type_error(program):
    result = run(program)
    assert (result.outcome, result.error_type) == (Outcome.FAILED, "TypeError"), result


@pytest.mark.parametrize("module", ["resource", "psutil", "joblib", "ipdb", "tkinter"])
def test_blocked_modules_cannot_be_imported(module):
    result = run(f"import {module}\n")
    assert (result.outcome, result.error_type) == (Outcome.FAILED, "ModuleNotFoundError")
    assert "halted; None in sys.modules" in result.error_message


def test_what_the_guard_leaves_alone_still_works():
    program = (
        "import os, sys\n"
        "assert os.environ['OMP_NUM_THREADS'] == '1'\n"
        "open('kept.txt', 'w').write('x')\n"
        "assert os.listdir('.') and open('kept.txt').read() == 'x'\n"
        "assert numpy.arange(4).sum() == 6 and np.zeros(2).shape == (2,)\n"
    )
    assert run(program).outcome == Outcome.PASSED


@pytest.mark.parametrize("module", HARNESS_METRIC_MODULES)
def test_modules_the_harness_child_holds_import_after_the_guard(module):
    # multiprocessing calls os.getcwd on import: it works only because it is preloaded, as the
    # metric's execute.py has imported it in every harness child.
    assert run(f"import {module}\n").outcome == Outcome.PASSED


def test_sys_exit_is_still_an_early_exit():
    assert run("import sys\nsys.exit(0)\n").error_type == "EarlyExit"


def test_canonical_solution_passes_with_the_guard(problem_set):
    problem = problem_set.problems[0]
    program = program_for(
        reference_candidate(problem, Variant.TESTS, problem.canonical_solution), problem
    )
    result = run_python_program(ExecJob("fixed", program, 10.0), SandboxLimits(timeout_s=10.0))
    assert result.outcome == Outcome.PASSED, result


def test_timeout_still_applies_with_the_guard():
    result = run("while True:\n    pass\n", timeout_s=1.5)
    assert (result.outcome, result.error_type) == (Outcome.TIMEOUT, "Timeout")
    assert 1.5 <= result.duration_s < 1.5 + 10
