"""Backend agreement and determinism, measured on a store.

`compare-backends`: settings that are the same except for the backend are paired, and for each
pair the share of samples with identical programs, the share with the same pass/fail outcome,
and the pass@1 difference are reported.

The match, precisely: two complete settings are paired when their keyed fields
(`setting_json`, the canonical JSON the setting key is the hash of) are equal after removing
the engine's backend and its backend-only options (`backend`, `vllm_batch_invariant`), and
their backends differ. So model and revision, dtype and quantization, benchmark, variant, data
hash, problem limit, template, decoding parameters (temperature, top_p, top_k; not the
decoding's name), max_length and its semantics and n_samples must be equal, and for sampled
settings also seed and seed policy (greedy settings ignore them, as the key does). Samples are
compared on (task_id, sample_index).

`repeat-check`: re-generates the first N problems of finished settings through their own
backend, in this process and outside the store (nothing is written), and reports the share of
samples whose program changed (the flip rate), per setting and per backend.

The functions above the shells are pure; the shells read the store through `Store`.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from storage.index import build_index
from storage.store import Store
from workers.keys import canonical_json

logger = logging.getLogger(__name__)

BACKEND_ONLY_ENGINE_FIELDS = ("backend", "vllm_batch_invariant")
BACKEND_ORDER = ("hf", "vllm")  # the first of a pair is the reference (the harness's backend)
MAX_LISTED = 20  # differing task ids listed per pair


class CompareError(ValueError):
    """A setting to check is unknown, ambiguous or not complete."""


# -- pure core -------------------------------------------------------------------------------


def match_key(setting_json: str) -> str:
    """The keyed fields of a setting minus its backend (see the module docstring)."""
    fields = json.loads(setting_json)
    engine = dict(fields.get("engine", {}))
    for name in BACKEND_ONLY_ENGINE_FIELDS:
        engine.pop(name, None)
    return canonical_json({**fields, "engine": engine})


def _backend_rank(backend: str) -> tuple[int, str]:
    return (BACKEND_ORDER.index(backend) if backend in BACKEND_ORDER else len(BACKEND_ORDER),
            backend)  # fmt: skip


@dataclass(frozen=True)
class Pair:
    match: str  # match_key of both
    a: Mapping[str, Any]  # settings row of the reference backend (hf when present)
    b: Mapping[str, Any]


def pair_settings(rows: Iterable[Mapping[str, Any]]) -> tuple[list[Pair], int]:
    """Every pair of rows with the same match key and different backends (reference backend
    first), and how many rows had no partner."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[match_key(row["setting_json"])].append(row)
    pairs, unpaired = [], 0
    for match, members in groups.items():
        members = sorted(members, key=lambda r: (_backend_rank(r["backend"]), r["setting_key"]))
        found = False
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if a["backend"] != b["backend"]:
                    pairs.append(Pair(match, a, b))
                    found = True
        if not found:
            unpaired += len(members)
    return pairs, unpaired


SampleKey = tuple[str, int]


def pass_at_1(passed: Mapping[SampleKey, bool]) -> float | None:
    """Mean over problems of the fraction of its samples that passed (pass@1's estimator)."""
    by_task: dict[str, list[bool]] = defaultdict(list)
    for (task, _), ok in passed.items():
        by_task[task].append(bool(ok))
    if not by_task:
        return None
    return sum(sum(v) / len(v) for v in by_task.values()) / len(by_task)


def agreement(
    programs_a: Mapping[SampleKey, str],
    passed_a: Mapping[SampleKey, bool],
    programs_b: Mapping[SampleKey, str],
    passed_b: Mapping[SampleKey, bool],
) -> dict[str, Any]:
    """Agreement of two settings over the samples both have (programs and outcomes)."""
    common = sorted(set(programs_a) & set(programs_b) & set(passed_a) & set(passed_b))
    if not common:
        return {"n_samples": 0, "identical_programs": None, "same_outcome": None,
                "pass_at_1_a": None, "pass_at_1_b": None, "pass_at_1_diff": None,
                "differing_tasks": []}  # fmt: skip
    same_program = [k for k in common if programs_a[k] == programs_b[k]]
    same_outcome = [k for k in common if bool(passed_a[k]) == bool(passed_b[k])]
    pa = pass_at_1({k: passed_a[k] for k in common})
    pb = pass_at_1({k: passed_b[k] for k in common})
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


def flips(stored: Mapping[SampleKey, Mapping[str, Any]],
          fresh: Mapping[SampleKey, Mapping[str, Any]]) -> dict[str, Any]:  # fmt: skip
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


def _complete_rows(store: Store) -> list[dict[str, Any]]:
    index = build_index(store)
    rows = store.read_table("settings").to_pylist()
    return [r for r in rows if index.get(r["setting_key"]) and index[r["setting_key"]].complete]


def _samples(store: Store, keys: Sequence[str]) -> dict[str, dict[SampleKey, dict[str, Any]]]:
    out: dict[str, dict[SampleKey, dict[str, Any]]] = defaultdict(dict)
    for row in store.read_table("generations", list(keys)).to_pylist():
        out[row["setting_key"]][(row["task_id"], int(row["sample_index"]))] = row
    return out


def _passed(store: Store, keys: Sequence[str]) -> dict[str, dict[SampleKey, bool]]:
    out: dict[str, dict[SampleKey, bool]] = defaultdict(dict)
    for row in store.read_table("executions", list(keys)).to_pylist():
        out[row["setting_key"]][(row["task_id"], int(row["sample_index"]))] = bool(row["passed"])
    return out


def _label(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: row.get(k) for k in ("model_name", "precision", "template", "decoding",
                                    "max_length", "n_samples")}  # fmt: skip


def compare_backends(store: Store) -> dict[str, Any]:
    """Agreement for every pair of settings that differ only in the backend."""
    rows = _complete_rows(store)
    pairs, unpaired = pair_settings(rows)
    keys = sorted({p.a["setting_key"] for p in pairs} | {p.b["setting_key"] for p in pairs})
    samples, passed = _samples(store, keys), _passed(store, keys)
    out = []
    for p in pairs:
        ka, kb = p.a["setting_key"], p.b["setting_key"]
        programs_a = {k: r["program"] for k, r in samples[ka].items()}
        programs_b = {k: r["program"] for k, r in samples[kb].items()}
        stats = agreement(programs_a, passed[ka], programs_b, passed[kb])
        out.append({**_label(p.a), "backend_a": p.a["backend"], "backend_b": p.b["backend"],
                    "setting_key_a": ka, "setting_key_b": kb, **stats})  # fmt: skip
    return {"n_complete_settings": len(rows), "n_pairs": len(out), "n_unpaired": unpaired,
            "pairs": out}  # fmt: skip


def render_comparison(data: Mapping[str, Any]) -> str:
    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}"

    lines = [
        f"{data['n_pairs']} pair(s) of settings that differ only in the backend "
        f"({data['n_complete_settings']} complete settings, {data['n_unpaired']} unpaired)"
    ]
    if not data["pairs"]:
        return "\n".join(lines)
    head = ("model", "precision", "template", "decoding", "max_len", "a/b", "samples",
            "same program %", "same outcome %", "pass@1 a", "pass@1 b", "diff (pp)")  # fmt: skip
    body = []
    for p in data["pairs"]:
        diff = p["pass_at_1_diff"]
        body.append((str(p["model_name"]), str(p["precision"]), str(p["template"]),
                     str(p["decoding"]), str(p["max_length"]), f"{p['backend_a']}/{p['backend_b']}",
                     str(p["n_samples"]), pct(p["identical_programs"]), pct(p["same_outcome"]),
                     pct(p["pass_at_1_a"]), pct(p["pass_at_1_b"]),
                     "-" if diff is None else f"{100 * diff:+.1f}"))  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    for p in data["pairs"]:
        if p["differing_tasks"]:
            lines.append(f"{p['setting_key_a'][:12]} vs {p['setting_key_b'][:12]}: programs "
                         f"differ on {', '.join(p['differing_tasks'])}")  # fmt: skip
    return "\n".join(lines)


# -- repeat-check --------------------------------------------------------------------------------


def resolve_keys(store: Store, wanted: Sequence[str]) -> list[dict[str, Any]]:
    """Settings rows for full keys or unique prefixes; each must be complete."""
    rows = {r["setting_key"]: r for r in _complete_rows(store)}
    every = {r["setting_key"] for r in store.read_table("settings").to_pylist()}
    out = []
    for prefix in wanted:
        hits = [k for k in every if k.startswith(prefix)]
        if len(hits) != 1:
            what = "matches no setting" if not hits else f"is ambiguous ({len(hits)} settings)"
            raise CompareError(f"setting {prefix!r} {what} in store {store.uri}")
        if hits[0] not in rows:
            raise CompareError(f"setting {hits[0][:12]} is not complete in store {store.uri}")
        out.append(rows[hits[0]])
    return out


def _run_overrides(store: Store, key: str) -> list[str]:
    """The overrides of the latest run whose grid contains `key`."""
    runs = sorted(store.read_table("runs").to_pylist(), key=lambda r: r["started_at"])
    for run in reversed(runs):
        if key in (run.get("setting_keys") or []):
            return [o for o in json.loads(run["overrides_json"] or "[]")
                    if not o.startswith("store=")]  # fmt: skip
    raise CompareError(f"no run in {store.uri} lists setting {key[:12]}; pass its overrides")


def _find_settings(store: Store, keys: Sequence[str], overrides: Sequence[str] | None):
    """(prepared benchmark, {key: SettingSpec}) by re-expanding the grids that produced them."""
    from orchestrator.config import load_run_config
    from orchestrator.runner import prepare

    found, benchmark = {}, None
    for key in keys:
        args = list(overrides) if overrides else _run_overrides(store, key)
        prepared = prepare(load_run_config([*args, f"store={store.uri}"]))
        cells = {c.key: c for c in prepared.cells}
        if key not in cells:
            raise CompareError(
                f"setting {key[:12]} is not a cell of the grid of overrides {args}; the data, "
                "the model revision or the code that makes keys changed since it was stored"
            )
        found[key], benchmark = cells[key].setting, prepared.benchmark
    return benchmark, found


def repeat_check(store: Store, wanted: Sequence[str], n_problems: int,
                 overrides: Sequence[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Re-generate the first `n_problems` problems of each setting with its own backend, in
    this process (one engine load per engine, the settings of an engine in one session run, as
    a unit is run), and compare with the stored samples. Writes nothing."""
    from orchestrator.plan import unit_engine
    from workers.keys import engine_key
    from workers.session import EngineSession

    if n_problems < 1:
        raise CompareError(f"-n must be >= 1, got {n_problems}")
    rows = resolve_keys(store, wanted)
    keys = [r["setting_key"] for r in rows]
    benchmark, settings = _find_settings(store, keys, overrides)
    stored = _samples(store, keys)
    by_engine: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        by_engine[engine_key(settings[key].engine)].append(key)
    results = []
    for members in by_engine.values():
        items = []
        for key in members:
            s = settings[key]
            limit = min(n_problems, s.benchmark.limit or n_problems)
            # The original key is passed along: per-sample seeds derive from it.
            items.append((key, replace(s, benchmark=replace(s.benchmark, limit=limit))))
        engine = unit_engine(settings[members[0]].engine, [s for _, s in items])
        session = EngineSession(engine, {benchmark.adapter.name: benchmark.adapter})
        try:
            outcomes = session.run(items)
        finally:
            session.close()
        for (key, _), outcome in zip(items, outcomes, strict=True):
            if not hasattr(outcome, "samples"):
                raise CompareError(f"re-generating {key[:12]} failed: {outcome.error_type}: "
                                   f"{outcome.error_message}")  # fmt: skip
            fresh = {(s.task_id, s.sample_index): {"program": s.program,
                     "continuation": s.continuation, "output_token_ids": list(s.output_token_ids)}
                     for s in outcome.samples}  # fmt: skip
            old = {k: {"program": v["program"], "continuation": v["continuation"],
                       "output_token_ids": list(v["output_token_ids"] or [])}
                   for k, v in stored[key].items() if k in fresh}  # fmt: skip
            row = next(r for r in rows if r["setting_key"] == key)
            results.append({"setting_key": key, "backend": row["backend"], **_label(row),
                            **flips(old, fresh)})  # fmt: skip
    return {"n_problems": n_problems, "settings": results, "per_backend": per_backend(results)}


def render_repeat_check(data: Mapping[str, Any]) -> str:
    lines = [f"re-generated the first {data['n_problems']} problem(s) of each setting "
             "(nothing written to the store)"]  # fmt: skip
    for r in data["settings"]:
        rate = "-" if r["flip_rate"] is None else f"{100 * r['flip_rate']:.1f}%"
        lines.append(
            f"{r['setting_key'][:12]} {r['backend']:5s} {r['precision']} {r['template']} "
            f"{r['decoding']} L{r['max_length']}: {r['n_flipped']}/{r['n_samples']} programs "
            f"changed (flip rate {rate}); continuations changed {r['n_continuation_changed']}, "
            f"token ids changed {r['n_tokens_changed']}"
            + (f"; tasks: {', '.join(r['flipped_tasks'])}" if r["flipped_tasks"] else "")
        )
    for backend, t in sorted(data["per_backend"].items()):
        rate = "-" if t["flip_rate"] is None else f"{100 * t['flip_rate']:.1f}%"
        lines.append(f"{backend}: flip rate {rate} ({t['n_flipped']}/{t['n_samples']} samples, "
                     f"{t['n_settings']} setting(s))")  # fmt: skip
    return "\n".join(lines)
