"""Each unit-test executor through the sandbox, on tiny programs (skipped where not installed)."""

from __future__ import annotations

import pytest

from workers.benchmarks.infibench.criteria import HookRef
from workers.benchmarks.infibench.executors import (
    EXECUTOR_LANGS,
    PYTHON_STARTUP_SLACK_S,
    executor_availability,
    limits_for,
    run_program,
)
from workers.benchmarks.infibench.hooks import call_hook, is_trusted
from workers.benchmarks.infibench.programs import Program


@pytest.fixture(scope="module")
def available() -> dict[str, bool]:
    return executor_availability()


def needs(available, lang):
    if not available[lang]:
        pytest.skip(f"{lang} executor not installed (see docs/infibench.md)")


def test_availability_lists_every_executor(available):
    assert set(available) == set(EXECUTOR_LANGS)
    assert available["python"]  # the project's own interpreter has the helper modules


@pytest.mark.parametrize(
    ("code", "passed", "result"),
    [
        ("assert 1 + 1 == 2", True, "passed"),
        ("assert 1 + 1 == 3", False, "failed: "),
        # exec(program, {}): __name__ is 'builtins', so a main guard does not run
        (
            "if __name__ == '__main__':\n    raise SystemExit(1)\nassert __name__ == 'builtins'",
            True,
            "passed",
        ),
        ("import sys\nsys.exit(0)", False, "failed: 0"),  # SystemExit is a failure
        ("import os\nos._exit(0)", False, "failed: returncode: 0"),  # never reported "passed"
        (
            "import pandas as pd, numpy as np, yolk, openpyxl, xlsxwriter\nassert pd and np",
            True,
            "passed",
        ),
        ("while True:\n    pass", False, "timed out"),
    ],
)
def test_python_executor(available, code, passed, result):
    needs(available, "python")
    outcome = run_program(Program("python", code, timeout_s=2.0))
    assert outcome.passed is passed
    assert outcome.result.startswith(result), outcome.result


@pytest.mark.parametrize(
    ("lang", "good", "bad"),
    [
        (
            "javascript",
            "const {JSDOM} = require('jsdom'); new JSDOM('<p>x</p>');",
            "require('node:assert').strictEqual(1, 2);",
        ),
        # type errors do not fail the test: only node's exit status counts
        ("typescript", "let x: number = 'a' as any; console.log(x);", "throw new Error('x');"),
        (
            "cpp",
            "#include <boost/any.hpp>\nint main() { boost::any a = 1; return 0; }",
            "int main() { return 3; }",
        ),
        (
            "java",
            "public class Main { public static void main(String[] a) {} }",
            "public class Main { public static void main(String[] a) { System.exit(1); } }",
        ),
        (
            "go",
            "package main\nfunc main() {}",
            'package main\nimport "os"\nfunc main() { os.Exit(1) }',
        ),
        ("r", "library(assert)\nassert(1 == 1)", "stop('x')"),
    ],
)
def test_compiled_and_script_executors(available, lang, good, bad):
    needs(available, lang)
    assert run_program(Program(lang, good, timeout_s=60.0)).passed
    outcome = run_program(Program(lang, bad, timeout_s=60.0))
    assert not outcome.passed and outcome.result.startswith("failed: ")


def test_timeouts_come_from_the_program(available):
    needs(available, "javascript")
    outcome = run_program(Program("javascript", "while (true) {}", timeout_s=1.0))
    assert (outcome.passed, outcome.timed_out, outcome.result) == (False, True, "time out")


def test_limits():
    assert limits_for("python", 10.0).timeout_s == 10.0 + PYTHON_STARTUP_SLACK_S
    java = limits_for("java", 10.0)
    assert (java.timeout_s, java.memory_mb, java.network) == (10.0, 16384, False)
    assert limits_for("cpp", 60.0, network=True).network


def test_untrusted_hooks_run_in_the_sandbox():
    source = "def handle(response):\n    return (len(response), 4, {'n': [1]})\n"
    hook = HookRef("cases.handler_x", "handle", "handler_x.py", source)
    assert not is_trusted(hook)
    assert call_hook(hook, "abc") == (3.0, 4.0, {"n": [1]})


def test_trusted_hooks_run_in_process(v21_suite):
    hook = v21_suite.case("0-0-26").criteria.customized.hook
    assert is_trusted(hook)
    assert call_hook(hook, "render: x") == (0.0, 1.0, "bad")
