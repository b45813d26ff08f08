"""Progress off a terminal (issue 13, §3): with stderr a pipe (Slurm, nohup, CI), the driver
logs a line per running engine every `progress.every_s` seconds, and the samples in those lines
grow during one long setting: the count includes what the replica reports of the chunk it is
generating, not only stored chunks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 20
# One setting (the defaults: the model's own template, greedy) of 20 problems that the fake
# backend answers in 0.5 s each, as one chunk: about 10 s in which nothing is stored, so every
# count above 0 in a line is the replica's own report of the chunk in flight.
GRID = [
    "model=tiny",
    "backend=fake",
    "model.repo_id='fake://delay=0.5'",
    f"benchmark.limit={LIMIT}",
    f"checkpoint.every_samples={LIMIT}",
    "progress.every_s=1",
    "cluster.num_cpus=2",
]
LINE = re.compile(
    r"^(\d\d:\d\d:\d\d) INFO reprogrid\.progress: tiny/fake/fp32/none: "
    r"(\d+)/(\d+) samples \(\d+%\), \d+ tok/s, ETA \S+( \(up to \S+\))?, 1 replica\(s\) (\S+)$"
)


def run_piped(args, env) -> tuple[int, str]:
    """`reprogrid run` as a subprocess whose stderr is a pipe (not a terminal)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", *args],
        env={**env, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the local Ray it started
        _, err = proc.communicate()
        raise AssertionError(f"the run did not finish:\n{err}") from None
    return proc.returncode, err


def test_periodic_lines_grow_during_one_long_setting(env, tmp_path):
    code, err = run_piped([*GRID, f"store={tmp_path / 'store'}"], env)
    assert code == 0, err
    lines = err.splitlines()
    assert not any("\r" in line for line in lines)  # no live bar: the stream is not a terminal
    start = next(
        i
        for i, line in enumerate(lines)
        if f"engine tiny/fake/fp32/none: {LIMIT} samples to generate on 1 replica(s)" in line
    )
    end = next(i for i, line in enumerate(lines) if "INFO reprogrid.progress: generated " in line)
    periodic = [m for line in lines[start:end] if (m := LINE.match(line))]
    assert len(periodic) >= 4, "\n".join(lines[start:end])
    assert {int(m.group(3)) for m in periodic} == {LIMIT}
    done = [int(m.group(2)) for m in periodic]
    assert done == sorted(done), done
    # samples done grow while the one chunk is generated: several counts strictly between
    # none and all of them, each reported on a later line than the last
    assert len({n for n in done if 0 < n < LIMIT}) >= 2, done
    assert "generating" in {m.group(5) for m in periodic}
    # a sample in flight: the ETA adds the bound its token budget sets
    assert any(m.group(4) for m in periodic), "\n".join(lines[start:end])
    # periodic: the lines carry different seconds, not one burst
    assert len({m.group(1) for m in periodic}) >= 3, done
    assert "complete tiny" in err
