"""`compare-backends`: settings that are the same except for the backend or its keyed options
(batched transformers against batch 1) are paired (see
orchestrator.analysis.agreement for the match; an imported file with the run it claims to
reproduce), and for each pair the share of samples with identical programs, the share with the
same pass/fail outcome, and the pass@1 difference are reported. Reads the store; the arithmetic
is in the analysis wing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.analysis.agreement import SampleKey, agreement, engine_label, pair_settings
from storage.index import build_index
from storage.store import Store


def complete_rows(store: Store) -> list[dict[str, Any]]:
    index = build_index(store)
    rows = store.read_table("settings").to_pylist()
    return [r for r in rows if index.get(r["setting_key"]) and index[r["setting_key"]].complete]


def sample_rows(store: Store, keys: Sequence[str]) -> dict[str, dict[SampleKey, dict[str, Any]]]:
    out: dict[str, dict[SampleKey, dict[str, Any]]] = defaultdict(dict)
    for row in store.read_table("generations", list(keys)).to_pylist():
        out[row["setting_key"]][(row["task_id"], int(row["sample_index"]))] = row
    return out


def _passed(store: Store, keys: Sequence[str]) -> dict[str, dict[SampleKey, bool]]:
    out: dict[str, dict[SampleKey, bool]] = defaultdict(dict)
    for row in store.read_table("executions", list(keys)).to_pylist():
        out[row["setting_key"]][(row["task_id"], int(row["sample_index"]))] = bool(row["passed"])
    return out


def setting_label(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: row.get(k)
        for k in ("model_name", "precision", "template", "decoding", "max_length", "n_samples")
    }


def compare_backends(store: Store) -> dict[str, Any]:
    """Agreement for every pair of settings that differ only in the backend."""
    rows = complete_rows(store)
    pairs, unpaired = pair_settings(rows)
    keys = sorted({p.a["setting_key"] for p in pairs} | {p.b["setting_key"] for p in pairs})
    samples, passed = sample_rows(store, keys), _passed(store, keys)
    out = []
    for p in pairs:
        ka, kb = p.a["setting_key"], p.b["setting_key"]
        programs_a = {k: r["program"] for k, r in samples[ka].items()}
        programs_b = {k: r["program"] for k, r in samples[kb].items()}
        stats = agreement(programs_a, passed[ka], programs_b, passed[kb])
        out.append(
            {
                **setting_label(p.a),
                "backend_a": p.a["backend"],
                "backend_b": p.b["backend"],
                # the backend and its keyed options: "hf" against "hf(hf_batch_size=8)"
                "engine_a": engine_label(p.a),
                "engine_b": engine_label(p.b),
                # an imported file (backend replay): the backend it claims to come from
                "claimed_backend_b": p.b.get("claimed_backend"),
                "setting_key_a": ka,
                "setting_key_b": kb,
                **stats,
            }
        )
    return {
        "n_complete_settings": len(rows),
        "n_pairs": len(out),
        "n_unpaired": unpaired,
        "pairs": out,
    }


def _backend(backend: str, claimed: str | None) -> str:
    """ "replay(hf)": an imported file and the backend it claims."""
    return f"{backend}({claimed})" if claimed else backend


def render_comparison(data: Mapping[str, Any]) -> str:
    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}"

    lines = [
        f"{data['n_pairs']} pair(s) of settings that differ only in the backend or its keyed "
        "options (or an imported file and the run it claims to reproduce) "
        f"({data['n_complete_settings']} complete settings, {data['n_unpaired']} unpaired)"
    ]
    if not data["pairs"]:
        return "\n".join(lines)
    head = (
        "model",
        "precision",
        "template",
        "decoding",
        "max_len",
        "a/b",
        "samples",
        "same program %",
        "same outcome %",
        "pass@1 a",
        "pass@1 b",
        "diff (pp)",
    )
    body = []
    for p in data["pairs"]:
        diff = p["pass_at_1_diff"]
        body.append(
            (
                str(p["model_name"]),
                str(p["precision"]),
                str(p["template"]),
                str(p["decoding"]),
                str(p["max_length"]),
                f"{p.get('engine_a', p['backend_a'])}/"
                f"{_backend(p.get('engine_b', p['backend_b']), p.get('claimed_backend_b'))}",
                str(p["n_samples"]),
                pct(p["identical_programs"]),
                pct(p["same_outcome"]),
                pct(p["pass_at_1_a"]),
                pct(p["pass_at_1_b"]),
                "-" if diff is None else f"{100 * diff:+.1f}",
            )
        )
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    for p in data["pairs"]:
        if p["differing_tasks"]:
            lines.append(
                f"{p['setting_key_a'][:12]} vs {p['setting_key_b'][:12]}: programs "
                f"differ on {', '.join(p['differing_tasks'])}"
            )
    return "\n".join(lines)


# -- repeat-check --------------------------------------------------------------------------------
