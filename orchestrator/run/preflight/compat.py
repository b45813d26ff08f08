"""The driver's Python and Ray against the cluster's: a mismatch is named, with what to do.

Ray refuses a driver whose Ray version differs from the cluster's, or whose Python does: to the
minor version through the Ray client (`ray://`), to the patch version for a `host:port` address
unless RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor (Ray 2.60). It says so deep inside
`ray.init` as a RuntimeError; `explain_connect_error` turns that into a ClusterError whose
message names both versions and the two ways out (a driver environment with the cluster's
versions, or `ray job submit`, which runs the driver on the cluster's own Python). Pure: the
caller passes the versions or the error (docs/install.md, "A driver and its cluster").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from orchestrator.errors import ClusterError

CLIENT_PREFIX = "ray://"
# Ray's own text (ray._private.utils.check_version_info); tests/unit/orchestrator/run/preflight/
# test_compat.py feeds it the installed Ray's message, so a change of wording fails there.
_RAY_MISMATCH = re.compile(
    r"Version mismatch: The cluster was started with:\s+Ray: (?P<cluster_ray>\S+)\s+"
    r"Python: (?P<cluster_python>\S+)\s+This process on (?P<where>.+?) was started with:\s+"
    r"Ray: (?P<driver_ray>\S+)\s+Python: (?P<driver_python>\S+)"
)


class MatchLevel(StrEnum):
    """How much of the Python version Ray compares."""

    MINOR = "minor"  # 3.11 == 3.11 (the Ray client; RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor)
    PATCH = "patch"  # 3.11.7 == 3.11.7 (Ray's default for a driver joining by address)


@dataclass(frozen=True)
class Versions:
    python: str  # e.g. "3.11.7"
    ray: str  # e.g. "2.60.0"


def _python_part(version: str, level: MatchLevel) -> tuple[str, ...]:
    return tuple(version.split(".")[: 2 if level is MatchLevel.MINOR else 3])


def mismatch_error(
    driver: Versions, cluster: Versions, address: str, level: MatchLevel
) -> ClusterError:
    """The message for a driver that Ray will not let join the cluster at `address`."""
    wanted = ".".join(_python_part(cluster.python, level))
    return ClusterError(
        f"the Ray cluster at {address} runs Python {cluster.python} with Ray {cluster.ray}; "
        f"this driver runs Python {driver.python} with Ray {driver.ray}. Ray needs the "
        f"driver's Ray to equal the cluster's and its Python to match to the {level.value} "
        f"version. Run reprogrid from an environment with Python {wanted} and ray=={cluster.ray} "
        "(the sandbox image is one: docs/install.md), or submit the run as a Ray job, which runs "
        "on the cluster's Python: ray job submit --address http://HEAD:8265 -- reprogrid run ..."
    )


def explain_connect_error(error: BaseException, address: str) -> ClusterError | None:
    """The ClusterError for Ray's version-mismatch error from `ray.init(address=...)`; None for
    any other error (re-raise it as it is)."""
    match = _RAY_MISMATCH.search(str(error))
    if match is None:
        return None
    driver = Versions(match["driver_python"], match["driver_ray"])
    cluster = Versions(match["cluster_python"], match["cluster_ray"])
    level = MatchLevel.MINOR if address.startswith(CLIENT_PREFIX) else MatchLevel.PATCH
    if driver.ray == cluster.ray and _python_part(driver.python, MatchLevel.MINOR) == (
        _python_part(cluster.python, MatchLevel.MINOR)
    ):
        level = MatchLevel.PATCH  # only the patch differs: Ray compared to the patch
    return mismatch_error(driver, cluster, address, level)
