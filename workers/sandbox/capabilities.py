"""What isolation this host gives (probed once, in a throwaway interpreter), the level that
makes for given limits, and the check before each run: refuse what must not run, fail below
`limits.require`, and state a weaker level once."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from typing import NamedTuple

from workers.execspec import IsolationLevel, SandboxLimits
from workers.sandbox import probe, protocol
from workers.sandbox.cgroups import cgroup_host
from workers.sandbox.results import IsolationBelowRequired, SandboxUnavailable
from workers.sandbox.slots import SANDBOX_SLOTS, SANDBOX_UID_BASE

logger = logging.getLogger(__name__)

TOOL = "reprogrid fork server (namespaces, mounts and cgroups set up by reprogrid itself)"
# What NAMESPACES needs besides a network namespace (unless limits.network), and FULL besides.
_NAMESPACE_FACTS = (
    "mount_namespace",
    "filesystem_view",
    "pid_namespace",
    "own_proc",
    "ipc_namespace",
    "disk_quota",
    "no_new_privs",
    "capabilities_dropped",
)
_FULL_FACTS = ("drop_privileges", "memory_cgroup", "pids_cgroup")

_HOST: dict | None = None
_HOST_LOCK = threading.Lock()
_WARNED: set[str] = set()
_WARN_LOCK = threading.Lock()


class IsolationReport(NamedTuple):
    level: IsolationLevel  # what the sandbox gives a run with these limits on this host
    facts: dict  # per property, JSON-native (for `doctor` and the execution record)


def host_facts() -> dict:
    """What this host gives, independent of limits (probed once per process)."""
    global _HOST
    with _HOST_LOCK:
        if _HOST is None:
            _HOST = _probe_host()
        return dict(_HOST)


def sandbox_isolation(limits: SandboxLimits | None = None) -> IsolationReport:
    """The level a run with `limits` gets on this host, and the facts behind it: one boolean
    per property (namespaces, view, cgroups, ...), how memory and network are bounded, the mode
    the fork servers run in, and `missing`: what keeps the level below FULL. Cheap after the
    first call (the probe is cached)."""
    limits = limits or SandboxLimits()
    facts = host_facts()
    wanted = list(_NAMESPACE_FACTS) + ([] if limits.network else ["network_namespace"])
    missing = [name for name in wanted + list(_FULL_FACTS) if not facts[name]]
    if facts["mode"] == "process" or any(not facts[name] for name in wanted):
        level = IsolationLevel.PROCESS
    elif missing:
        level = IsolationLevel.NAMESPACES
    else:
        level = IsolationLevel.FULL
    network = (
        "allowed (limits.network)"
        if limits.network
        else "own namespace, loopback down"
        if facts["network_namespace"]
        else "the host's network (no network namespace)"
    )
    memory = (
        "cgroup: the program and its descendants together"
        if facts["memory_cgroup"]
        else "RLIMIT_AS: each process on its own (no memory cgroup)"
    )
    facts.update(level=level.value, network=network, memory_limit=memory, missing=missing)
    return IsolationReport(level, facts)


def sandbox_capabilities() -> dict[str, bool]:
    """The host's boolean facts (what `doctor` prints as yes/NO)."""
    return {k: v for k, v in host_facts().items() if isinstance(v, bool)}


def check_isolation(limits: SandboxLimits) -> IsolationReport:
    """Before a run: refuse to run as root without the uid switch, fail below
    `limits.require` (IsolationBelowRequired), and log a weaker level once per process."""
    report = sandbox_isolation(limits)
    facts = report.facts
    if facts["root"] and not facts["drop_privileges"]:
        raise SandboxUnavailable(
            f"running as root but cannot switch to the sandbox uid {SANDBOX_UID_BASE}; refusing "
            "to run untrusted code as root"
        )
    if limits.require is not None and report.level < limits.require:
        raise IsolationBelowRequired(
            f"sandbox isolation on this host is {report.level.value!r}, below the required "
            f"{IsolationLevel(limits.require).value!r} (execution.require); missing: "
            f"{', '.join(facts['missing']) or 'none'}; levels: "
            f"{', '.join(level.value for level in IsolationLevel)}"
        )
    if report.level < IsolationLevel.FULL:
        text = (
            f"sandbox isolation is {report.level.value!r} here, not 'full' (missing: "
            f"{', '.join(facts['missing'])}; memory: {facts['memory_limit']}; network: "
            f"{facts['network']}); recorded with every execution"
        )
        with _WARN_LOCK:
            if text not in _WARNED:
                _WARNED.add(text)
                logger.warning(text)
    return report


def _probe_host() -> dict:
    root = os.geteuid() == 0
    found = _steady_probe(root)
    cgroups = cgroup_host() if root or found.get("user_namespace") else None
    version = cgroups.version if cgroups is not None else None  # None: no slot cgroups
    has_cgroup = version is not None
    ns_ok = all(found.get(step, False) for step in probe.SERVER_STEPS[1:] + ("own_proc",))
    mode = ("namespaces" if root else "userns") if ns_ok else "process"
    facts: dict[str, object] = {name: bool(found.get(name, False)) for name in probe.ALL_STEPS}
    facts.update(
        root=root,
        mode=mode,
        subprocess=True,
        process_group=True,
        rlimits=True,
        fork_server=True,
        kill_strays_by_uid=facts["drop_privileges"],
        private_tmp=facts["disk_quota"],
        memory_cgroup=has_cgroup,
        pids_cgroup=has_cgroup,
        cgroup=version.value if version is not None else None,
        cgroup_path=cgroups.bases[0] if cgroups is not None and version is not None else None,
        cgroup_reason=None if has_cgroup else (cgroups.reason if cgroups else "not root"),
        slot_uids=f"{SANDBOX_UID_BASE}-{SANDBOX_UID_BASE + SANDBOX_SLOTS - 1}" if root else None,
        tool=TOOL,
    )
    return facts


# How often a probe that found a step missing is run again before the host is taken to lack it.
PROBE_TRIES = 3


def _steady_probe(root: bool, tries: int = PROBE_TRIES) -> dict[str, bool]:
    """The probe's steps, run again (up to `tries` in all) while a step a host of this kind has
    is missing: the level a probe finds is recorded in the execution identity of everything
    this process executes, so one probe that failed on a loaded host (a slow namespace, a lost
    child) would weaken the sandbox and make the next run execute those settings again. Keeps
    the run that found the most steps; says so when runs disagree. A host that really lacks a
    step pays `tries` probes, once per process."""
    expected = [
        s for s in probe.ALL_STEPS if s != ("user_namespace" if root else "drop_privileges")
    ]
    runs = [_run_probe()]
    while len(runs) < tries and not all(runs[-1].get(s) for s in expected):
        runs.append(_run_probe())
    best = max(runs, key=lambda found: sum(bool(found.get(s)) for s in probe.ALL_STEPS))
    if any(r != best for r in runs):
        lost = sorted({s for r in runs for s in expected if best.get(s) and not r.get(s)})
        logger.warning(
            "sandbox probe: %d runs disagreed (%s missing in some, found in another): kept "
            "the run that found the most",
            len(runs),
            ", ".join(lost),
        )
    return best


def _run_probe() -> dict[str, bool]:
    config = {"package_dirs": package_dirs(), "uid": SANDBOX_UID_BASE}
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-I",
                "-B",
                "-c",
                protocol.bootstrap("workers.sandbox.probe"),
                json.dumps(config),
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
        found = json.loads(done.stdout.decode().strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        logger.warning("sandbox probe failed (%s): assuming no namespaces", e)
        return {}
    return {k: bool(v) for k, v in found.items()}


def package_dirs() -> list[str]:
    """The folders of the `workers` and `workers.sandbox` packages (for the bootstraps)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.dirname(here), here]
