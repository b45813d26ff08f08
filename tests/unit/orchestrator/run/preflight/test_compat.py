"""run/preflight/compat.py: a driver whose Python or Ray differs from the cluster's gets a
ClusterError that names both and what to do, and Ray's own mismatch error (produced here by the
installed Ray's check) is recognised."""

from __future__ import annotations

import platform
from importlib import metadata

import pytest

from orchestrator.errors import ClusterError
from orchestrator.run.preflight.compat import (
    MatchLevel,
    Versions,
    explain_connect_error,
    mismatch_error,
)


def test_a_mismatch_names_both_versions_and_the_ways_out():
    error = mismatch_error(
        Versions("3.12.1", "2.60.0"), Versions("3.11.14", "2.60.0"), "head:6379", MatchLevel.MINOR
    )
    assert isinstance(error, ClusterError)
    message = str(error)
    assert "Python 3.11.14" in message and "Python 3.12.1" in message
    assert "Python 3.11 and ray==2.60.0" in message
    assert "ray job submit" in message and "head:6379" in message


def _rays_own_error(cluster_python: str, level: str) -> RuntimeError:
    """What the installed Ray raises for a driver that joins a cluster of another Python."""
    utils = pytest.importorskip("ray._private.utils")
    info = {"ray_version": metadata.version("ray"), "python_version": cluster_python}
    with pytest.raises(RuntimeError) as e:
        utils.check_version_info(info, "node 10.0.0.1", python_version_match_level=level)
    return e.value


def test_rays_mismatch_error_becomes_a_cluster_error():
    other = "3.10.1" if not platform.python_version().startswith("3.10") else "3.13.0"
    error = explain_connect_error(_rays_own_error(other, "minor"), "ray://head:10001")
    assert isinstance(error, ClusterError)
    message = str(error)
    assert f"runs Python {other}" in message
    assert f"this driver runs Python {platform.python_version()}" in message
    assert "Python 3.1" in message and "ray job submit" in message


def test_a_patch_only_mismatch_says_patch():
    major, minor, _ = platform.python_version().split(".")
    error = explain_connect_error(_rays_own_error(f"{major}.{minor}.999", "patch"), "head:6379")
    assert error is not None and "to the patch version" in str(error)
    assert f"Python {major}.{minor}.999 and ray==" in str(error)


def test_other_errors_are_left_alone():
    assert explain_connect_error(RuntimeError("Failed to connect to GCS"), "head:6379") is None
