"""JSON text with two-space indents, the same characters as `json.dumps(value, indent=2,
default=str)`, in a fifth of its time.

Python's json module uses its C encoder only without an indent; with one, every value goes
through nested generators in Python, and report.json at 6,000 settings (420,000 values) took
about 2 s of a report's CPU. Here each value costs one type lookup and one C-level call. The
output is checked against json.dumps (tests/unit/orchestrator/report/formats/test_indented.py).
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

INDENT = "  "


def _float(value: float) -> str:
    """json's float text (`allow_nan=True`): repr, or NaN and the infinities by name."""
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == -float("inf"):
        return "-Infinity"
    return float.__repr__(value)


# Exact types only: a subclass (a numpy float, an int enum) takes the general path, as json
# dispatches it by isinstance.
_SCALARS: dict[type, Callable[[Any], str]] = {
    str: encode_basestring_ascii,
    int: int.__repr__,
    float: _float,
    bool: lambda v: "true" if v else "false",
    type(None): lambda _: "null",
}


def _key(key: Any) -> str:
    """A dict key as json writes it (keys that are not text are turned into text first)."""
    if isinstance(key, str):
        return encode_basestring_ascii(key)
    if isinstance(key, float):
        return encode_basestring_ascii(_float(key))
    if key is True or key is False or key is None:
        return encode_basestring_ascii({True: "true", False: "false", None: "null"}[key])
    if isinstance(key, int):
        return encode_basestring_ascii(int.__repr__(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _value(value: Any, level: int) -> str:
    scalar = _SCALARS.get(type(value))
    if scalar is not None:
        return scalar(value)
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None or value is True or value is False:
        return _SCALARS[type(value)](value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, (list, tuple)):
        return _list(value, level)
    if isinstance(value, dict):
        return _dict(value, level)
    return _value(str(value), level)  # json's `default=str`


def _list(items: list[Any] | tuple[Any, ...], level: int) -> str:
    if not items:
        return "[]"
    inner = "\n" + INDENT * (level + 1)
    body = ("," + inner).join(_value(v, level + 1) for v in items)
    return f"[{inner}{body}\n{INDENT * level}]"


def _dict(mapping: dict[Any, Any], level: int) -> str:
    if not mapping:
        return "{}"
    inner = "\n" + INDENT * (level + 1)
    scalars = _SCALARS
    parts = []
    for key, value in mapping.items():
        scalar = scalars.get(type(value))
        text = scalar(value) if scalar is not None else _value(value, level + 1)
        parts.append(f"{_key(key)}: {text}")
    return f"{{{inner}{(',' + inner).join(parts)}\n{INDENT * level}}}"


def indented(value: Any) -> str:
    """`json.dumps(value, indent=2, default=str)`, character for character."""
    return _value(value, 0)
