"""Every performance script starts the way the README and docs run it: `python perf/<name>.py`
from the repository root, with no PYTHONPATH (Python then puts perf/, not the root, on the
path), as far as its `--help`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.name for p in (ROOT / "perf").glob("*.py"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_there_are_perf_scripts_and_each_is_documented_with_its_command():
    assert len(SCRIPTS) >= 8
    text = "\n".join(p.read_text(encoding="utf-8") for p in DOCS)
    undocumented = [name for name in SCRIPTS if f"python perf/{name}" not in text]
    assert not undocumented, f"no `python perf/<name>` in README.md or docs/: {undocumented}"


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_perf_script_starts_from_the_repository_root_without_pythonpath(name):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, f"perf/{name}", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"python perf/{name} --help:\n{done.stderr[-3000:]}"
    assert done.stdout.startswith("usage: "), done.stdout[:500]
