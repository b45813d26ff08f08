"""Where the sweeps folder is and how Hydra composes it: the only reader of the environment.

`compose_config` returns Hydra's `DictConfig`; config/load.py turns it into plain data once.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from orchestrator.errors import ConfigError

ENV_DATA_DIR = "REPROGRID_DATA_DIR"
ENV_CACHE_DIR = "REPROGRID_CACHE_DIR"
ENV_SWEEPS_DIR = "REPROGRID_SWEEPS_DIR"
ENV_RAY_ADDRESS = "RAY_ADDRESS"
ENV_RAY_TMPDIR = "RAY_TMPDIR"  # Ray's session files (where `auto` finds a cluster's address)
ENV_CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"  # the GPUs a local Ray instance counts


def sweeps_dir() -> Path:
    configured = os.environ.get(ENV_SWEEPS_DIR)
    if configured:
        return Path(configured).resolve()
    # sweeps/ sits next to the orchestrator package (editable install or source checkout).
    here = Path(__file__).resolve().parents[3] / "sweeps"
    if (here / "config.yaml").is_file():
        return here
    spec = importlib.util.find_spec("sweeps")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    raise ConfigError(f"sweeps/ config folder not found; set {ENV_SWEEPS_DIR}")


def default_cache_dir() -> str:
    return os.environ.get(ENV_CACHE_DIR) or str(Path.home() / ".cache" / "reprogrid")


def compose_config(overrides: Sequence[str]) -> DictConfig:
    GlobalHydra.instance().clear()
    cache = default_cache_dir()
    data = os.environ.get(ENV_DATA_DIR)
    env_overrides = [f"paths.cache_dir={cache}"]
    if data:
        env_overrides.append(f"paths.data_dir={data}")
    try:
        with initialize_config_dir(config_dir=str(sweeps_dir()), version_base="1.3"):
            return compose("config", overrides=env_overrides + list(overrides))
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(str(e).strip()) from e


def available(group: str) -> list[str]:
    return sorted(p.stem for p in (sweeps_dir() / group).glob("*.yaml"))


def environment() -> dict[str, str | None]:
    """The environment variables a run config records (Ray's address, its session folder, the
    GPUs a local instance counts), read here and nowhere else."""
    return {
        ENV_RAY_ADDRESS: os.environ.get(ENV_RAY_ADDRESS) or None,
        ENV_RAY_TMPDIR: os.environ.get(ENV_RAY_TMPDIR) or None,
        ENV_CUDA_VISIBLE: os.environ.get(ENV_CUDA_VISIBLE),
    }
