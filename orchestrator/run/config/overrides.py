"""Command-line overrides: sweeps become grid axes, and nothing the user typed is silently
ignored or silently added.

Hydra accepts `experiment=<unknown>` for an optional group (the default is used), tells the user
to write `+key=value` for an unknown key and then accepts that, and lists a group's options
without a suggestion. Here every group option must exist, every key (with or without `+`) must
be one the composed config has, and the error names the value, the nearest valid one and the
valid list. Checked before anything is loaded or started.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from orchestrator.errors import ConfigError
from orchestrator.run.config.options import choice_error

# Axes a grid may sweep, and the top-level key each one sets.
GRID_AXES = (
    "model",
    "template",
    "decoding",
    "max_length",
    "precision",
    "dtype",
    "quant",
    "backend",
    "variant",
    "n_samples",
    "seed",
    "seed_policy",
    "length_semantics",
    "bnb_4bit_quant_type",
    "samples_per_call",
)
# Config groups (folders of sweeps/): a value names a file in the folder.
GROUPS = ("model", "benchmark", "grid", "cluster", "experiment")
# Groups whose files set top-level keys (`# @package _global_`): no key is named after them.
GLOBAL_GROUPS = ("experiment",)
# Mappings whose entries are the user's to name: `+decodings.hot={...}` adds a preset.
OPEN_MAPPINGS = ("decodings",)
# Keys whose comma list is one value (a list), never a sweep: `benchmark.problems=a,b`.
LIST_KEYS = ("benchmark.problems",)
# Keys whose value is taken literally (Hydra would read `{variant}` as a dict).
LITERAL_KEYS = ("replay_path",)
_ABSENT = object()


@dataclass(frozen=True)
class ParsedOverrides:
    """Overrides split into group selections, value overrides (both for compose) and sweeps."""

    groups: tuple[str, ...]  # e.g. "grid=paper60", "experiment=cpu-demo"
    values: tuple[str, ...]  # e.g. "benchmark.limit=20", "store=results/x"
    sweeps: dict[str, list[str]]  # axis -> values (comma lists and grid.<axis>=...)
    value_keys: tuple[tuple[str, bool], ...]  # (key, added with +) of each value override

    @property
    def plain(self) -> list[str]:
        return [*self.groups, *self.values]


def parse_overrides(overrides: Sequence[str]) -> ParsedOverrides:
    """Split overrides; a sweep of a non-axis or a malformed override is a ConfigError."""
    overrides = [_as_written(text) for text in overrides]
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as e:
        raise ConfigError(f"bad override syntax: {e}") from e
    groups, values, keys = [], [], []
    sweeps: dict[str, list[str]] = {}
    for text, override in zip(overrides, parsed, strict=True):
        key = override.key_or_group
        axis = key.removeprefix("grid.") if key.startswith("grid.") else None
        if override.is_sweep_override() or axis is not None:
            name = axis or key
            if name not in GRID_AXES:
                raise choice_error("grid axis", name, GRID_AXES)
            sweeps[name] = _sweep_values(override)
        elif key in GROUPS:
            groups.append(text)
        else:
            values.append(text)
            keys.append((key, override.type in (OverrideType.ADD, OverrideType.FORCE_ADD)))
    return ParsedOverrides(tuple(groups), tuple(values), sweeps, tuple(keys))


def _as_written(text: str) -> str:
    """An override of a LIST_KEYS key as a Hydra list of quoted strings, one of a
    LITERAL_KEYS key quoted; every other override unchanged."""
    key, eq, value = text.partition("=")
    bare = key.lstrip("+~")
    if not eq or value.startswith(("[", "'", '"')):
        return text
    if bare in LIST_KEYS and value not in ("null", ""):
        items = ",".join(_quoted(v.strip()) for v in value.split(","))
        return f"{key}=[{items}]"
    if bare in LITERAL_KEYS and value != "null":
        return f"{key}={_quoted(value)}"
    return text


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sweep_values(override: Override) -> list[str]:
    if override.is_sweep_override():
        return [str(v) for v in override.sweep_string_iterator()]
    return [str(override.value())]


def check_group_options(parsed: ParsedOverrides, available: Callable[[str], list[str]]) -> None:
    """Every group value names an existing option (`model=a,b` sweeps too)."""
    for text in parsed.groups:
        group, _, value = text.lstrip("+~").partition("=")
        _check_option(group, value, available(group))
    for name in parsed.sweeps.get("model", []):
        _check_option("model", name, available("model"))


def _check_option(group: str, value: str, options: list[str]) -> None:
    if value not in options:
        raise choice_error(f"{group}", value, options)


def check_keys(parsed: ParsedOverrides, base: DictConfig) -> None:
    """Every value override's key exists in `base` (the config composed with the groups),
    whether or not it was written with `+`; `+` may add entries to OPEN_MAPPINGS only."""
    for key, added in parsed.value_keys:
        if key == "hydra" or key.startswith("hydra."):
            continue
        parts = key.split(".")
        if added and len(parts) == 2 and parts[0] in OPEN_MAPPINGS:
            continue
        if OmegaConf.select(base, key, default=_ABSENT) is not _ABSENT:
            continue
        node: Any = base
        for depth, part in enumerate(parts):
            if not isinstance(node, DictConfig) or part not in node:
                raise _unknown_key(key, parts, depth, node, added)
            node = node[part]
        raise ConfigError(f"config key {key!r} cannot be set from the command line")


def _unknown_key(key: str, parts: list[str], depth: int, node: Any, added: bool) -> ConfigError:
    """The error for `parts[depth]`, absent from `node`. At the top, the groups count among
    the valid names whether or not this command line selects them (a group is no key of the
    composed config until it is selected: `modle=tiny` alone must still suggest `model`)."""
    part = parts[depth]
    siblings = {str(k) for k in node} if isinstance(node, DictConfig) else set()
    if depth == 0:
        if part in GLOBAL_GROUPS and len(parts) > 1:
            return ConfigError(
                f"no config key {key!r}: {part}=NAME selects a file that sets top-level keys"
            )
        if part in GROUPS and len(parts) > 1:
            return ConfigError(
                f"config key {key!r} belongs to a {part}: select one with {part}=NAME"
            )
        siblings |= set(GROUPS)
    parent = ".".join(parts[:depth])
    what = "config key" + (f" under {parent!r}" if parent else "")
    what += " (added with +)" if added else ""
    return choice_error(what, part, sorted(siblings))
