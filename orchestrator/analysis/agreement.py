"""Agreement between settings that differ only in the backend, and the flip rate of
re-generation. Pure functions of rows (no store, no I/O).

The match, precisely: two complete settings are paired when their keyed fields
(`setting_json`, the canonical JSON the setting key is the hash of) are equal after removing
the engine's backend and every field its backend adds (all engine fields but the model's:
`MODEL_ENGINE_FIELDS`), and those removed fields differ: another backend, or the same backend
with another keyed option (batched transformers, `hf_batch_size`, against batch 1; vLLM's
batch-invariant kernels against its default ones). So model and revision, dtype and
quantization, benchmark, variant, data hash, problem limit, template, decoding parameters
(temperature, top_p, top_k; not the decoding's name), max_length and its semantics and
n_samples must be equal, and for sampled settings also seed and seed policy (greedy settings
ignore them, as the key does). A setting whose text no model generated here (replayed or
imported: its device is none) pairs only with the backend it claims to come from (its
`claimed_backend`): the run it reproduces; without a claim it pairs with nothing. The first
of a pair is the backend first in name order (the report's reference column); a replayed one
is always second. Samples are compared on (task_id, sample_index).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workers.keys import canonical_json
from workers.scoring import pass_at_1_of

# The engine's keyed fields that name the model and its numerics; the others (the backend and
# what its definition keys) differ between backends.
MODEL_ENGINE_FIELDS = ("model", "revision", "dtype", "quant", "bnb_4bit_quant_type")
NO_DEVICE = (None, "none")  # a settings row's device when no model generated its text here
MAX_LISTED = 20  # differing task ids listed per pair


def match_key(setting_json: str) -> str:
    """The keyed fields of a setting minus its backend (see the module docstring)."""
    fields = json.loads(setting_json)
    engine = fields.get("engine", {})
    kept = {name: engine[name] for name in MODEL_ENGINE_FIELDS if name in engine}
    return canonical_json({**fields, "engine": kept})


def replayed(row: Mapping[str, Any]) -> bool:
    """No model generated the setting's text here (a replayed or imported file)."""
    return row.get("device") in NO_DEVICE


def engine_variant(row: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's keyed fields that are not the model's: its backend and what the backend's
    definition keys (`hf_batch_size`, `vllm_batch_invariant`, ...)."""
    engine = json.loads(row["setting_json"]).get("engine", {})
    return {k: v for k, v in engine.items() if k not in MODEL_ENGINE_FIELDS}


def engine_label(row: Mapping[str, Any]) -> str:
    """The backend, with the keyed options that make its variant: "hf(hf_batch_size=8)"."""
    extra = {k: v for k, v in engine_variant(row).items() if k != "backend"}
    shown = ",".join(f"{k}={v}" for k, v in sorted(extra.items()) if not k.endswith("sha256"))
    return f"{row['backend']}({shown})" if shown else str(row["backend"])


def _rank(row: Mapping[str, Any]) -> tuple[bool, str, int, str, str]:
    """The reference first: a backend before a replay, then by name, then its variant with
    the fewest keyed options (batch 1 before batched transformers)."""
    variant = engine_variant(row)
    return (
        replayed(row),
        str(row["backend"]),
        len(variant),
        canonical_json(variant),
        row["setting_key"],
    )


def can_pair(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Different engine variants (backends, or a backend's keyed options); a replayed setting
    only with the backend it claims."""
    if engine_variant(a) == engine_variant(b):
        return False
    for x, y in ((a, b), (b, a)):
        if replayed(x):
            return x.get("claimed_backend") == y["backend"] and not replayed(y)
    return True


@dataclass(frozen=True)
class Pair:
    match: str  # match_key of both
    a: Mapping[str, Any]  # settings row of the reference backend (hf when present)
    b: Mapping[str, Any]


def pair_settings(rows: Iterable[Mapping[str, Any]]) -> tuple[list[Pair], int]:
    """Every pair of rows with the same match key that `can_pair` (reference backend first,
    a replay last), and how many rows had no partner."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[match_key(row["setting_json"])].append(row)
    pairs, unpaired = [], 0
    for match, members in groups.items():
        members = sorted(members, key=_rank)
        paired: set[str] = set()
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if can_pair(a, b):
                    pairs.append(Pair(match, a, b))
                    paired |= {a["setting_key"], b["setting_key"]}
        unpaired += sum(r["setting_key"] not in paired for r in members)
    return pairs, unpaired


SampleKey = tuple[str, int]


def agreement(
    programs_a: Mapping[SampleKey, str],
    passed_a: Mapping[SampleKey, bool],
    programs_b: Mapping[SampleKey, str],
    passed_b: Mapping[SampleKey, bool],
) -> dict[str, Any]:
    """Agreement of two settings over the samples both have (programs and outcomes)."""
    common = sorted(set(programs_a) & set(programs_b) & set(passed_a) & set(passed_b))
    if not common:
        return {
            "n_samples": 0,
            "identical_programs": None,
            "same_outcome": None,
            "pass_at_1_a": None,
            "pass_at_1_b": None,
            "pass_at_1_diff": None,
            "differing_tasks": [],
        }
    same_program = [k for k in common if programs_a[k] == programs_b[k]]
    same_outcome = [k for k in common if bool(passed_a[k]) == bool(passed_b[k])]
    pa = pass_at_1_of({k: passed_a[k] for k in common})
    pb = pass_at_1_of({k: passed_b[k] for k in common})
    differing = sorted({k[0] for k in common if programs_a[k] != programs_b[k]})
    return {
        "n_samples": len(common),
        "identical_programs": len(same_program) / len(common),
        "same_outcome": len(same_outcome) / len(common),
        "pass_at_1_a": pa,
        "pass_at_1_b": pb,
        "pass_at_1_diff": None if pa is None or pb is None else pb - pa,
        "n_differing_programs": len(common) - len(same_program),
        "differing_tasks": differing[:MAX_LISTED],
    }


def flips(
    stored: Mapping[SampleKey, Mapping[str, Any]], fresh: Mapping[SampleKey, Mapping[str, Any]]
) -> dict[str, Any]:
    """How many re-generated samples differ from the stored ones: program (the flip rate),
    raw continuation, output token ids."""
    common = sorted(set(stored) & set(fresh))
    changed = {
        field: [k for k in common if stored[k][field] != fresh[k][field]]
        for field in ("program", "continuation", "output_token_ids")
    }
    n = len(common)
    return {
        "n_samples": n,
        "n_flipped": len(changed["program"]),
        "flip_rate": len(changed["program"]) / n if n else None,
        "n_continuation_changed": len(changed["continuation"]),
        "n_tokens_changed": len(changed["output_token_ids"]),
        "flipped_tasks": sorted({k[0] for k in changed["program"]})[:MAX_LISTED],
    }


def per_backend(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Flip counts summed per backend."""
    totals: dict[str, dict[str, Any]] = {}
    for r in results:
        t = totals.setdefault(r["backend"], {"n_settings": 0, "n_samples": 0, "n_flipped": 0})
        t["n_settings"] += 1
        t["n_samples"] += r["n_samples"]
        t["n_flipped"] += r["n_flipped"]
    for t in totals.values():
        t["flip_rate"] = t["n_flipped"] / t["n_samples"] if t["n_samples"] else None
    return totals


# -- reading the store -------------------------------------------------------------------------
