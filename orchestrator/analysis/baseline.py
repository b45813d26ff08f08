"""The effects baseline: which value each setting axis takes in the reference setting. Pure.

`parse_baseline` reads `--baseline KEY=VALUE` items over the default (own template, greedy, max
length 2048, bf16); `check_baseline_in_store` refuses a value that the user set and that no
setting of the store has, so a typo (`template=instrct`) is an error rather than an empty
effects table.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from orchestrator.errors import ConfigError

AXES = ("template", "decoding", "max_length", "precision", "backend")
DEFAULT_BASELINE: dict[str, Any] = {
    "template": "own",
    "decoding": "greedy",
    "max_length": 2048,
    "precision": "bf16",
}
ANY = "*"  # a baseline value meaning "any value; do not analyse this axis"
PRECISION_ORDER = ("bf16", "fp16", "fp32", "int8", "int4")
# Axes whose values are fixed by reprogrid itself (the others, the backend included, are checked
# against the values the store holds: check_baseline_in_store).
KNOWN_VALUES: dict[str, tuple[str, ...]] = {"precision": PRECISION_ORDER}


class BaselineError(ConfigError):
    """A `--baseline` item that names no axis or no value a setting can have."""


def _choice_error(what: str, value: Any, choices: Sequence[Any]) -> BaselineError:
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
    hint = f" Did you mean: {close[0]}?" if close else ""
    return BaselineError(f"Unknown {what} {value!r}.{hint} Valid: {', '.join(map(str, choices))}")


def _parse_value(key: str, value: str) -> Any:
    if key == "max_length":
        try:
            number = int(value)
        except ValueError:
            raise BaselineError(
                f"baseline max_length must be a positive integer, got {value!r}"
            ) from None
        if number < 1:
            raise BaselineError(f"baseline max_length must be a positive integer, got {value!r}")
        return number
    if key in KNOWN_VALUES and value not in KNOWN_VALUES[key]:
        raise _choice_error(f"baseline {key}", value, KNOWN_VALUES[key])
    return value


def parse_baseline(items: Sequence[str], base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`key=value` items over the default baseline; `key=*` frees an axis. Raises BaselineError
    (a ValueError) for a malformed item, an unknown axis or an impossible value, with a
    did-you-mean and the valid choices."""
    baseline = dict(DEFAULT_BASELINE if base is None else base)
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise BaselineError(f"baseline item {item!r} must look like key=value")
        if key not in AXES:
            raise _choice_error("baseline axis", key, AXES)
        if value == ANY:
            baseline.pop(key, None)
        else:
            baseline[key] = _parse_value(key, value)
    return baseline


def check_baseline_in_store(
    baseline: Mapping[str, Any], present: Mapping[str, Collection[Any]]
) -> None:
    """Refuse a baseline value that differs from the default and that no setting has.

    `present`: axis -> the values the store's settings take. The default baseline is never
    refused (a store without bf16 settings still gets a report, with a note); a value the user
    chose is, with a did-you-mean over the store's values. An empty store refuses nothing."""
    for axis, value in baseline.items():
        values = present.get(axis)
        if not values or value == DEFAULT_BASELINE.get(axis) or value in values:
            continue
        ordered = sorted(values, key=str)
        close = difflib.get_close_matches(str(value), [str(v) for v in ordered], n=1)
        hint = f" Did you mean: {close[0]}?" if close else ""
        raise BaselineError(
            f"No setting of the store has baseline {axis} {value!r}.{hint} "
            f"Values in the store: {', '.join(map(str, ordered))}"
        )
