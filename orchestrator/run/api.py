"""What the tools wing (orchestrator/tools/) may use of the run wing: loading a config,
preparing a grid, checking it before a run, and recording a run in the store. The tools import
this module and nothing else of `orchestrator.run` (tests/unit/test_layering.py); running a
grid (`execute/runner.py`) is the command line's alone."""

from __future__ import annotations

from orchestrator.run.config.compose import available
from orchestrator.run.config.load import load_run_config
from orchestrator.run.config.options import choice_error
from orchestrator.run.config.specs import CellDefaults, RunConfig
from orchestrator.run.execute.record import RunFacts, RunRecord
from orchestrator.run.plan.planner import unit_engine
from orchestrator.run.preflight.checks import preflight
from orchestrator.run.preflight.hardware import detect_gpus
from orchestrator.run.preflight.hub import HubProbe, needs_hub, offline_hub, probe_hub
from orchestrator.run.preflight.weights import WeightsStatus, classify_hub_error, local_check
from orchestrator.run.prepare.prepared import (
    PreparedGrid,
    file_sha256,
    load_benchmark,
    prepare,
    with_selection,
)
from orchestrator.run.prepare.provenance import library_versions

__all__ = [
    "CellDefaults",
    "HubProbe",
    "PreparedGrid",
    "RunConfig",
    "RunFacts",
    "RunRecord",
    "WeightsStatus",
    "available",
    "choice_error",
    "classify_hub_error",
    "detect_gpus",
    "file_sha256",
    "library_versions",
    "load_benchmark",
    "load_run_config",
    "local_check",
    "needs_hub",
    "offline_hub",
    "preflight",
    "prepare",
    "probe_hub",
    "unit_engine",
    "with_selection",
]
