"""Ray's lifetime for a run: connect to `cluster.address`, or start a private local instance,
and stop what this run started. With execute/dispatch.py and workers/tasks.py, the only code
that talks to Ray."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from orchestrator.errors import ClusterError
from orchestrator.run.config.specs import ClusterSpec
from orchestrator.run.preflight.address import probe_cluster
from orchestrator.run.preflight.compat import explain_connect_error

logger = logging.getLogger(__name__)


def start_ray(cluster: ClusterSpec) -> dict[str, Any]:
    """Connect to `cluster.address`, or start a private local instance (never attach to a
    machine-wide one by accident: address="local"). The local instance declares the execution
    resource, one slot per CPU."""
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
        with services_in_their_own_process_groups():
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

    original = getattr(services, "ConsolePopen", None)
    if original is None:
        logger.warning(
            "this Ray version starts its services differently: a signal to the driver's "
            "process group also reaches the local instance's processes"
        )
        yield
        return

    class OwnGroupPopen(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("process_group", 0)  # setpgid(0, 0) in the child, before exec
            super().__init__(*args, **kwargs)

    services.ConsolePopen = OwnGroupPopen  # type: ignore[misc]  # a class name, rebound
    try:
        yield
    finally:
        services.ConsolePopen = original  # type: ignore[misc]


CONNECT_ATTEMPTS = 3


def _connect(address: str):
    """Connect to an existing cluster. A `ray://` client connection is retried: the head starts
    a client server per connection, which can time out on a loaded head."""
    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        try:
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
