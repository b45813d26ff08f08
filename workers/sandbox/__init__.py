"""Runs untrusted generated code in isolated subprocesses; nothing else in reprogrid spawns it.

Every run, whoever the caller, gets: a fresh process in its own session and process group; a
fresh working folder holding only the given files, which is also HOME and TMPDIR and is removed
afterwards; a scrubbed environment (the parent's PATH, a C.UTF-8 locale, one thread for
OpenMP/OpenBLAS/MKL, no bytecode writing, plus `env` for run_command); /dev/null as stdin unless
stdin text is given; stdout and stderr captured and capped to their last
`limits.max_output_bytes`; and rlimits set in the child, lowered to any hard limit the parent
already has: RLIMIT_AS `memory_mb`, RLIMIT_CPU `cpu_s` (default timeout + 5 s; SIGXCPU, then
SIGKILL 1 s later), RLIMIT_FSIZE `file_size_mb`, RLIMIT_NPROC `max_processes`, no core files.
When the main process exits or the wall-clock deadline passes, the process group is SIGKILLed.
The rest depends on the caller's privileges and on what the one-time probe found
(`sandbox_capabilities()`):

As root (CI, a bare-metal worker):
- always: the program runs as an unprivileged uid of its own, one per concurrent *slot*
  (SANDBOX_UID_BASE + i, gid the same, no supplementary groups, held through a host-wide lock
  file; it owns the working folder): it cannot write root-owned places, signal the caller or
  read /proc/<caller>/environ, and RLIMIT_NPROC counts the slot only. Every process of that
  uid is killed when the slot is taken and after a run that timed out or had no pid namespace
  (strays that left the process group). If the uid switch is impossible, nothing runs
  (SandboxUnavailable);
- where the kernel allows (`pid_namespace`): a new pid namespace in which the program is pid 2
  under a trusted pid 1: when the run ends, the kernel kills and reaps everything in it
  (setsid()ed strays too, no zombies left), and the caller has no pid the program could signal;
- unless limits.network, where the kernel allows (`network_namespace`): a new network
  namespace with only a loopback that is down;
- where the kernel allows (`mount_namespace`): a new mount namespace in which /tmp, /var/tmp,
  /dev/shm and /run/lock are private tmpfs of `file_size_mb`, and folders the slot uid cannot
  traverse (a 0700 /root holding a pyenv interpreter) are covered by a tmpfs through which only
  the paths the run needs are bound back. Without it, a needed path behind such a folder is
  SandboxUnavailable.

Not root (degraded; logged once): no privilege drop, so the program runs as the caller's uid
and can write wherever the caller can and read the caller's /proc files; no mount namespace
(/tmp is shared). Where unprivileged user namespaces are allowed (`user_namespace`), it runs in
a new user namespace (mapping only the caller's uid and gid) with a new pid namespace and,
unless limits.network, a new network namespace (so strays die and the caller is not
addressable); otherwise only the process group is killed, and setsid()ed strays survive.
RLIMIT_NPROC counts every process of the uid there, so it is set to that count plus
`max_processes`. Without a network namespace, a program keeps network access (logged once).

This is OS-level isolation, not a container: files stay readable wherever their modes allow.
The docker/ images run as a non-root user, so inside them the non-root rules apply and the
container is the outer boundary (docs/cluster.md).

The harness guard (run_python_program only, `harness_guard=True` by default): after the header
imports and before exec, the runner applies the metric's `reliability_guard()` (human-eval,
maximum_memory_bytes=None), which sets builtins exit/quit/help, most destructive os functions
(remove, unlink, rename, chmod, kill, fork, system, putenv, getcwd, chdir, ...),
shutil.rmtree/move/chown and subprocess.Popen to None, and blocks importing ipdb, joblib,
resource, psutil and tkinter. This is for faithful scores, not security: a program that uses
those fails here as in the harness, and one that works around them is still contained by the
isolation above. Applied before the imports it would break `import numpy` (spec §10).

Modules: api (entry points), results (result types, scoring), runner (the runner script, the
guard, the report pipe), supervisor (one run from the parent), streams (pipes), workdir (the
folder), isolation (the child's setup), capabilities (the probe), slots (uids, killing by uid).
"""

from workers.sandbox.api import run_command, run_python_program
from workers.sandbox.capabilities import sandbox_capabilities
from workers.sandbox.results import CommandResult, SandboxUnavailable, score_program
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
    "SandboxUnavailable",
    "run_command",
    "run_python_program",
    "sandbox_capabilities",
    "score_program",
]
