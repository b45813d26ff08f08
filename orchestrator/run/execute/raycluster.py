"""Ray's lifetime for a run: connect to `cluster.address`, or start a private local instance,
and stop what this run started. With execute/dispatch.py and workers/tasks.py, the only code
that talks to Ray."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayActorError, RayError, RayTaskError

from orchestrator.errors import ClusterError
from orchestrator.run.config.specs import ClusterSpec
from orchestrator.run.execute.faults import ActorFate
from orchestrator.run.execute.signals import STOP_SIGNALS
from orchestrator.run.preflight.address import probe_cluster
from orchestrator.run.preflight.compat import explain_connect_error

logger = logging.getLogger(__name__)


def start_ray(cluster: ClusterSpec) -> dict[str, Any]:
    """Connect to `cluster.address`, or start a private local instance (never attach to a
    machine-wide one by accident: address="local"). The local instance declares the execution
    resource, one slot per CPU. SIGTERM and SIGINT keep the driver's handlers throughout
    (stop_signals_kept): a stop while Ray starts is acted on once `ray.init` returns."""
    if ray.is_initialized():
        return {"address": "already-initialized", "started": False}
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if cluster.address:
        logger.info("connecting to the Ray cluster at %s", cluster.address)
        # the head may have gone since the preflight: a closed port is an error now, not a
        # retry loop of Ray's
        probe_cluster(cluster)
        ctx = _connect(cluster.address)
        started = False
    else:
        logger.info("starting a local Ray instance")
        slots = cluster.num_cpus or os.cpu_count() or 1
        resources = {cluster.exec_resource: float(slots)} if cluster.exec_resource else None
        with services_in_their_own_process_groups(), stop_signals_kept(), no_idle_services():
            ctx = ray.init(
                address="local",
                num_cpus=cluster.num_cpus,
                num_gpus=cluster.num_gpus,
                resources=resources,
                include_dashboard=False,
                log_to_driver=False,
            )
        started = True
    address = getattr(ctx, "address_info", {}).get("address", cluster.address or "local")
    logger.info("Ray ready at %s (%s)", address, "started by this run" if started else "connected")
    return {"address": address, "started": started}


@contextlib.contextmanager
def services_in_their_own_process_groups() -> Iterator[None]:
    """While inside, the processes Ray starts for a local instance (GCS, raylet and the ones
    they start) begin in process groups of their own, outside the driver's.

    A signal to the driver's process group (what a scheduler or `kill -TERM -PGID` sends to a
    job) must reach the driver alone: it stops at its next safe point and then stops the
    instance. Ray blocks SIGINT in its services for this reason, not SIGTERM; a group SIGTERM
    killed GCS while the driver was in a call that needs it (the first submission of a task
    function is exported to GCS), and Ray ended the driver 60 s later with exit 1 and the run
    still marked running. On Windows Ray itself starts its services in new process groups.
    They still die with the driver if it is killed outright: Ray binds them to it (Linux
    PR_SET_PDEATHSIG), whatever their group."""
    from ray._private import services  # the Popen class every service is started with

    with _constructed_with(
        services,
        "ConsolePopen",
        {"process_group": 0},  # setpgid(0, 0) in each child, before exec
        "this Ray version starts its services differently: a signal to the driver's process "
        "group also reaches the local instance's processes",
    ):
        yield


@contextlib.contextmanager
def no_idle_services() -> Iterator[None]:
    """While inside, a local instance starts without two services a private instance never
    uses: the autoscaler's monitor (a private instance has no nodes to add) and the log monitor
    (it forwards workers' output to drivers that ask for it; the driver passes
    log_to_driver=False, and each worker's log file is still written). Each is a Python process
    that imports Ray and polls for the instance's life: a run starts sooner and a machine with
    few cores keeps them for its engines. `ray.init` takes no option for them, so the
    parameters it builds the node from are given these two defaults."""
    from ray._private import parameter

    with _constructed_with(
        parameter,
        "RayParams",
        {"no_monitor": True, "include_log_monitor": False},
        "this Ray version builds its node differently: the local instance also starts the "
        "autoscaler's monitor and the log monitor",
    ):
        yield


@contextlib.contextmanager
def _constructed_with(
    owner: Any, name: str, defaults: dict[str, Any], unsupported: str
) -> Iterator[None]:
    """While inside, the class Ray constructs as `owner.name` is a subclass whose constructor
    takes `defaults` for the arguments it is not given. Where that class is missing or its
    constructor takes no such argument, nothing is swapped and `unsupported` is logged."""
    original = getattr(owner, name, None)
    if original is None or not _accepts(original, defaults):
        logger.warning(unsupported)
        yield
        return

    class WithDefaults(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**defaults, **kwargs})

    setattr(owner, name, WithDefaults)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _accepts(cls: type, arguments: dict[str, Any]) -> bool:
    parameters = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True
    return all(argument in parameters for argument in arguments)


@contextlib.contextmanager
def stop_signals_kept() -> Iterator[None]:
    """While inside (a `ray.init`), SIGTERM and SIGINT stay with the driver's own handlers, so
    that a stop at any moment of Ray's start is recorded like any other (execute/signals.py).

    Left alone, `ray.init` takes SIGTERM twice. Before it starts or connects it installs a
    handler that ends the process (`sys.exit(15)`: exit 15, the run `failed`). Then the
    driver's core worker installs Abseil's failure signal handler, which on SIGTERM writes
    "*** SIGTERM received", passes the signal on, and leaves an alarm that aborts the process
    3 s later whatever the driver does (exit 134). So Ray's handler is not set, and the core
    worker is told to install none: Ray reads `RAY_DISABLE_FAILURE_SIGNAL_HANDLER` from
    `ray_constants` when it creates the core worker, and the value set here is this process's
    alone (Ray's services and workers read their environment, and keep their crash handler).
    The cost: a crash of the driver's own core worker prints Python's fault handler's
    traceback (Ray enables it) but no C++ stack. Kept out, the crash handler is also not taken
    away again: `ray.shutdown` uninstalled it by setting SIGTERM back to its default, so a
    stop after Ray stopped (compaction, the score table) killed the driver outright. The
    handlers the driver had are set again after, should a Ray version install one some other
    way."""
    from ray._private import ray_constants
    from ray._private import utils as ray_utils

    swaps = [
        (ray_utils, "set_sigterm_handler", _driver_keeps_sigterm),
        (ray_constants, "RAY_DISABLE_FAILURE_SIGNAL_HANDLER", True),
    ]
    missing = [name for owner, name, _ in swaps if not hasattr(owner, name)]
    if missing:
        logger.warning(
            "this Ray version has no %s: a SIGTERM while Ray starts may end the driver "
            "before it marks its run interrupted",
            " or ".join(missing),
        )
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in swaps if name not in missing]
    main = threading.current_thread() is threading.main_thread()
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS} if main else {}
    for owner, name, value in swaps:
        if name not in missing:
            setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        for s, handler in handlers.items():
            if handler is not None:  # None: a handler not set from Python, not ours to restore
                signal.signal(s, handler)


def _driver_keeps_sigterm(_handler: object) -> None:
    """Ray's `set_sigterm_handler` while the driver starts Ray: the driver's handler stays."""
    logger.debug("Ray's SIGTERM handler not installed: the driver keeps its own")


CONNECT_ATTEMPTS = 3


def _connect(address: str):
    """Connect to an existing cluster. A `ray://` client connection is retried: the head starts
    a client server per connection, which can time out on a loaded head."""
    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        try:
            with stop_signals_kept():
                return ray.init(address=address, log_to_driver=False)
        except RuntimeError as e:
            mismatch = explain_connect_error(e, address)  # another Python or Ray version
            if mismatch is None:
                raise
            raise mismatch from e
        except ConnectionError as e:
            if not address.startswith("ray://") or attempt == CONNECT_ATTEMPTS:
                raise ClusterError(f"cannot connect to the Ray cluster at {address}: {e}") from e
            logger.warning(
                "connecting to %s failed (%s); retrying", address, str(e).splitlines()[0]
            )
            time.sleep(2.0 * attempt)
    raise AssertionError("unreachable")


def stop_ray() -> None:
    """Disconnect; a local instance this process started stops with it."""
    if ray.is_initialized():
        ray.shutdown()


def describe_error(error: RayError) -> tuple[str, str]:
    """Error type and message of a Ray failure, unwrapping application exceptions."""
    if isinstance(error, RayTaskError):
        cause = error.cause if getattr(error, "cause", None) is not None else error
        return type(cause).__name__, str(cause).strip().splitlines()[-1][:2000]
    text = str(error).strip()
    return type(error).__name__, (text.splitlines()[0] if text else type(error).__name__)[:2000]


def actor_fate(error: RayActorError) -> ActorFate:
    """What Ray says of an engine actor whose call failed: its process died and Ray restarts
    it (ActorUnavailableError: restarts left), its engine could not load, or it is dead."""
    if isinstance(error, ActorUnavailableError):
        return ActorFate.RESTARTING
    return ActorFate.INIT_FAILED if error.actor_init_failed else ActorFate.DEAD


def alive_nodes() -> set[str]:
    """The ids of the cluster's live nodes, as the GCS knows them."""
    return {node["NodeID"] for node in ray.nodes() if node.get("Alive")}
