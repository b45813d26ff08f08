"""tests/processes.py finds what a run leaves behind by its marker: a process that the run
started in a process group (session) of its own and that outlived it, as Ray's workers are
started by raylet, which the driver's process group does not hold."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.processes import alive_in_group, alive_with_env, left_behind, run_marker

# A driver that starts a worker in a session of its own, prints its pid and exits.
DRIVER = (
    "import subprocess, sys\n"
    "worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
    "                          start_new_session=True, stdout=subprocess.DEVNULL)\n"
    "print(worker.pid, flush=True)\n"
)


def test_a_worker_in_its_own_process_group_is_found_by_the_run_marker_and_stopped():
    name, value = run_marker()
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        env={**os.environ, name: value},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    out, _ = driver.communicate(timeout=60)
    worker = int(out)
    try:
        assert alive_in_group(driver.pid) == []  # the group check sees nothing left
        assert alive_with_env(name, value) == [worker]  # the marker finds it
        assert alive_with_env(name, run_marker()[1]) == []  # another run's marker does not
    finally:
        assert left_behind(name, value, timeout_s=0) == [worker]  # and it is stopped
    assert left_behind(name, value, timeout_s=10) == []
