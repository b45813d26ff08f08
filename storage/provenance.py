"""A setting's engine provenance as structured values: the libraries it generated with (library
-> every version its chunks ran with) and every host, Ray node, device and effective dtype its
chunks ran on (lists). Pure functions over a settings row, the one reader of these columns, so
that a row written before schema version 6 (flat strings only) reads as one written today.

Before version 6 a setting's chunks were merged by splitting each flat column on "," and joining
with ",": `backend_version`, which holds ", " itself ("transformers 5.19.0, torch 2.13.0+cpu"),
grew by one copy per chunk. Read back, such a value names each library once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# library -> every version met, in the order met (one, unless chunks ran with different installs)
Versions = dict[str, tuple[str, ...]]

VERSIONS_COLUMN = "backend_versions_json"
VERSIONS_TEXT_COLUMN = "backend_version"  # its readable text (the column of schemas 1 to 5)
# Each listed column (schema version 6) and its readable text (the column of schemas 1 to 5).
LISTED = {
    "hostnames": "hostname",
    "node_ids": "node_id",
    "devices": "device",
    "effective_dtypes": "effective_dtype",
}
# "<library> <version>", and vLLM's "<distribution> <version> (vllm <version>)": what the
# backends wrote before version 6 (a version starts with a digit).
_LEGACY_PAIR = re.compile(r"([^\s()]+) (\d\S*)(?: \(([^\s()]+) (\d[^\s()]*)\))?")


def merged_versions(*parts: Mapping[str, Sequence[str]]) -> Versions:
    """The libraries of every part, each version once, in the order met."""
    out: dict[str, list[str]] = {}
    for part in parts:
        for library, versions in part.items():
            seen = out.setdefault(library, [])
            seen.extend(v for v in versions if v not in seen)
    return {library: tuple(versions) for library, versions in out.items()}


def merged_values(*parts: Iterable[str]) -> tuple[str, ...]:
    """Every distinct non-empty value of the parts, in the order met."""
    return tuple(dict.fromkeys(v for part in parts for v in part if v))


def versions_json(versions: Mapping[str, Sequence[str]]) -> str:
    """The stored form: canonical JSON of {library: [version, ...]}."""
    return json.dumps({k: list(v) for k, v in versions.items()}, sort_keys=True)


def versions_text(versions: Mapping[str, Sequence[str]]) -> str:
    """For display: "torch 2.13.0+cpu, transformers 5.19.0" (libraries sorted; several
    versions of one library as "5.19.0 / 5.20.0")."""
    return ", ".join(
        f"{library} {' / '.join(v)}".rstrip() for library, v in sorted(versions.items())
    )


def values_text(values: Sequence[str]) -> str:
    """For display: the values joined with ", "."""
    return ", ".join(values)


def versions_of(row: Mapping[str, Any]) -> Versions:
    """The row's libraries and versions: its `backend_versions_json`, or for a row written
    before version 6 its `backend_version` read back (`legacy_versions`)."""
    stored = row.get(VERSIONS_COLUMN)
    if isinstance(stored, str) and stored:
        decoded = json.loads(stored)
        return {str(k): tuple(str(v) for v in vs) for k, vs in decoded.items()}
    return legacy_versions(row.get(VERSIONS_TEXT_COLUMN))


def legacy_versions(text: Any) -> Versions:
    """A `backend_version` written before version 6, as libraries and versions. Chunks' values
    were joined with "," and a value's own libraries with ", ", so every comma ends a part;
    a part that is no "<library> <version>" (e.g. "replay", a server's fingerprint) is kept
    whole, as a library without a version."""
    if not isinstance(text, str):
        return {}
    parts: list[Versions] = []
    for part in (p.strip() for p in text.split(",")):
        match = _LEGACY_PAIR.fullmatch(part)
        if match is None:
            parts.append({part: ()} if part else {})
            continue
        library, version, inner, inner_version = match.groups()
        parts.append({library: (version,)})
        if inner is not None:
            parts.append({inner: (inner_version,)})
    return merged_versions(*parts)


def values_of(row: Mapping[str, Any], column: str) -> tuple[str, ...]:
    """The row's values of a listed column (`LISTED`: hostnames, node_ids, devices,
    effective_dtypes), or for a row written before version 6 its flat column split on ","
    (the separator its merge used; none of these values holds a comma)."""
    if column not in LISTED:
        raise ValueError(f"unknown listed provenance column {column!r}; choices: {sorted(LISTED)}")
    stored = row.get(column)
    if stored is not None and not isinstance(stored, str | float):  # a list (None, NaN: none)
        return merged_values(str(v) for v in stored)
    text = row.get(LISTED[column])
    return merged_values(p.strip() for p in text.split(",")) if isinstance(text, str) else ()


def engine_version(row: Mapping[str, Any], library: str) -> str | None:
    """The version(s) the row records for one library (the engine's own, for an export);
    None when it records none."""
    versions = versions_of(row).get(library)
    return " / ".join(versions) if versions else None
