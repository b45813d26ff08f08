"""Every config option's type and valid range, checked once at the CLI edge, before anything
runs. A bad value is a ConfigError that names the key, the value and what is valid (the CLI
exits 2); a typo gets a did-you-mean.

Ranges are what can produce a meaningful result, not what the type allows: a sandbox memory
limit below what the interpreter needs to import the harness's header kills every program,
canonical fixes included, so it is refused instead of stored as a score of 0.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.analysis.cost import GPUS
from orchestrator.errors import ConfigError
from workers.backends.base import OptionField
from workers.backends.registry import backend_definitions


def choice_error(what: str, value: Any, choices: Sequence[Any]) -> ConfigError:
    """ "Unknown <what> 'x'. Did you mean: y? Valid: a, b, c" (the suggestion when one is close)."""
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
    hint = f" Did you mean: {close[0]}?" if close else ""
    return ConfigError(f"Unknown {what} {value!r}.{hint} Valid: {', '.join(map(str, choices))}")


def parse_choice(enum_type, what: str, value: Any):
    """`enum_type(value)`, or a choice_error listing the enum's values."""
    try:
        return enum_type(str(value))
    except ValueError:
        raise choice_error(what, value, [e.value for e in enum_type]) from None


@dataclass(frozen=True)
class Range:
    """A numeric option: its type, bounds (inclusive unless open) and whether null is allowed."""

    kind: type  # int or float
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # True: the value must be strictly greater than `low`
    nullable: bool = False
    why: str = ""  # shown with the error, when the bound has a reason worth knowing

    def describe(self) -> str:
        name = "an integer" if self.kind is int else "a number"
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {_fmt(self.low)}")
        if self.high is not None:
            parts.append(f"<= {_fmt(self.high)}")
        text = f"{name} {' and '.join(parts)}".strip()
        return text + (" (or null)" if self.nullable else "")


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


MAX_SEED = 2**32 - 1  # transformers.set_seed seeds NumPy, which takes 0 .. 2**32 - 1
# What the sandboxed interpreter needs to import the harness's header (numpy included).
MIN_MEMORY_MB = 512

# Values of a setting (top-level keys and grid axes).
CELL_NUMBERS: dict[str, Range] = {
    "max_length": Range(int, 1, 1 << 20),
    "n_samples": Range(int, 1, 100_000),
    "samples_per_call": Range(int, 1, 100_000),
    "seed": Range(int, 0, MAX_SEED, why="the harness seeds NumPy with it"),
}

# Every other numeric option, by its dotted key.
OPTION_NUMBERS: dict[str, Range] = {
    "benchmark.limit": Range(int, 1, nullable=True),
    "execution.timeout_s": Range(float, 0, 86_400, low_open=True),
    "execution.memory_mb": Range(
        int,
        MIN_MEMORY_MB,
        1 << 22,
        why="programs need that much address space to import the harness's header",
    ),
    "execution.max_processes": Range(int, 1, 65_536),
    "execution.disk_mb": Range(int, 1, 1 << 20),
    "execution.workers": Range(int, 1, 4096, nullable=True),
    "cluster.num_cpus": Range(int, 1, nullable=True),
    "cluster.num_gpus": Range(int, 0, nullable=True),
    "cluster.gpus": Range(int, 1, 1_000_000, nullable=True),
    "cluster.engine_cpus": Range(float, 0),
    "cluster.exec_cpus": Range(float, 0, low_open=True),
    "cluster.max_retries": Range(int, 0, 1000),
    "cluster.exec_max_retries": Range(int, 0, 1000),
    "cluster.setting_timeout_s": Range(float, 0, low_open=True, nullable=True),
    "cluster.max_pending_exec": Range(int, 1),
    "cluster.replicas": Range(int, 1, 64),
    "checkpoint.every_s": Range(float, 0, low_open=True),
    "checkpoint.every_samples": Range(int, 1, nullable=True),
    "checkpoint.first_samples": Range(int, 1),
    "checkpoint.batched_samples": Range(int, 1),
    "generation.batch_size": Range(int, 1, 4096, nullable=True),
    "progress.every_s": Range(float, 0, low_open=True),
    "compaction.after_run": Range(int, 1, nullable=True),
    "store_lock.lease_s": Range(
        float, 1, 3600, why="a driver killed outright blocks the next run for up to this long"
    ),
    "cluster.connect_timeout_s": Range(
        float, 0, 600, low_open=True, why="an unreachable cluster.address fails after this long"
    ),
    "estimate.bandwidth_gbps": Range(float, 0, 100_000, low_open=True, nullable=True),
    "estimate.output_tokens": Range(int, 1, 1 << 20),
    "estimate.chars_per_token": Range(float, 0.5, 32),
    "estimate.cpu_bandwidth_gbps": Range(float, 0, 100_000, low_open=True),
    "estimate.cpu_gflops": Range(float, 0, 10_000_000, low_open=True),
    "preflight.hub_timeout_s": Range(float, 0, 600, low_open=True),
}

OPTION_FLAGS = ("cluster.cpu_if_no_gpus",)

# Options that name one of a few values.
OPTION_CHOICES: dict[str, tuple[str, ...]] = {
    "estimate.gpu": ("auto", *GPUS),
}


def number(key: str, value: Any, spec: Range) -> Any:
    """`value` as spec.kind within its range; ConfigError naming the key otherwise."""
    if value is None:
        if spec.nullable:
            return None
        raise _range_error(key, value, spec)
    if isinstance(value, bool):
        raise _range_error(key, value, spec)
    try:
        parsed: float = spec.kind(value) if spec.kind is float else _integer(value)
    except (TypeError, ValueError):
        raise _range_error(key, value, spec) from None
    if spec.kind is float and not math.isfinite(parsed):
        raise _range_error(key, value, spec)
    low_ok = spec.low is None or (parsed > spec.low if spec.low_open else parsed >= spec.low)
    high_ok = spec.high is None or parsed <= spec.high
    if not (low_ok and high_ok):
        raise _range_error(key, value, spec)
    return parsed


def _integer(value: Any) -> int:
    """An int from an int, an integral float, or a decimal string (never 2.5 -> 2)."""
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise ValueError(value)
    return int(str(value).strip())


def _range_error(key: str, value: Any, spec: Range) -> ConfigError:
    why = f"; {spec.why}" if spec.why else ""
    return ConfigError(f"{key} must be {spec.describe()}, got {value!r}{why}")


def flag(key: str, value: Any) -> bool:
    """A YAML boolean (true/false); ConfigError naming the key for anything else."""
    if isinstance(value, bool):
        return value
    raise ConfigError(f"{key} must be true or false, got {value!r}")


def option(cfg: Mapping[str, Any], key: str) -> Any:
    """The checked value of a numeric, boolean or choice option, read from the composed
    config."""
    node: Any = cfg
    for part in key.split("."):
        node = node[part]
    if key in OPTION_FLAGS:
        return flag(key, node)
    if key in OPTION_CHOICES:
        if str(node) not in OPTION_CHOICES[key]:
            raise choice_error(key, node, OPTION_CHOICES[key])
        return str(node)
    return number(key, node, OPTION_NUMBERS[key])


def read_options(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Every numeric, boolean and choice option of the composed config, the backends' blocks
    included (each backend's definition declares its fields): dotted key -> value. The first
    bad one is a ConfigError naming it."""
    checked = {key: option(cfg, key) for key in [*OPTION_NUMBERS, *OPTION_FLAGS, *OPTION_CHOICES]}
    for definition in backend_definitions():
        block = definition.config_block
        if block is None or block not in cfg:
            continue  # no block in the config: the backend's options keep their defaults
        for fld in definition.option_fields:
            key = f"{block}.{fld.name}"
            checked[key] = backend_option(key, _node(cfg, key), fld)
    return checked


def backend_option(key: str, value: Any, fld: OptionField) -> Any:
    """One field of a backend's block, checked as its OptionField says."""
    if value is None and fld.nullable:
        return None
    if fld.kind is bool:
        return flag(key, value)
    if fld.kind is str:
        if fld.choices and str(value) not in fld.choices:
            raise choice_error(key, value, fld.choices)
        if value is None or not str(value).strip():
            raise ConfigError(f"{key} must be a non-empty text, got {value!r}")
        return str(value)
    spec = Range(fld.kind, fld.low, fld.high, fld.low_open, fld.nullable, fld.why)
    return number(key, value, spec)


def _node(cfg: Mapping[str, Any], key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ConfigError(f"the config has no {key} (the backend's block is incomplete)")
        node = node[part]
    return node
