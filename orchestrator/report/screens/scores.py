"""The score table printed after a run (read back from the store)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from storage.store import Store

COLUMNS = (
    ("key", "key12"),
    ("model", "model_name"),
    ("backend", "backend"),
    ("precision", "precision"),
    ("template", "template"),
    ("decoding", "decoding"),
    ("max_len", "max_length"),
    ("status", "status"),
    ("metric", "metric"),
    ("score %", "value"),
    ("n", "n_problems"),
    ("problems", "selection"),
    ("truncated", "n_prompt_truncated"),
    ("mismatch", "n_decode_mismatch"),
)


def score_table(store_uri: str, keys: Sequence[str]) -> list[dict[str, Any]]:
    """One row per setting of `keys`: the setting's fields, status and score (if any)."""
    store = Store(store_uri)
    settings = {r["setting_key"]: r for r in store.read_table("settings", keys).to_pylist()}
    scores = {r["setting_key"]: r for r in store.read_table("scores", keys).to_pylist()}
    rows = []
    for key in keys:
        row = dict(settings.get(key) or {"setting_key": key, "status": "pending"})
        score = scores.get(key)
        if score and row.get("status") == "complete":
            row.update({k: v for k, v in score.items() if k not in row or row[k] is None})
        row["selection"] = selection_label(row.get("problems"), row.get("limit"))
        row["key12"] = key[:12]  # enough for `export-generations --setting`
        value = row.get("value")
        row["score_pct"] = None if value is None else 100 * value
        rows.append(row)
    return rows


def selection_label(problems: str | None, limit: int | None) -> str:
    """The problem selection in words: all, the first N, or the task ids named."""
    parts = []
    if problems:
        ids = problems.split(",")
        parts.append(problems if len(ids) <= 3 else f"{len(ids)} named ({ids[0]}, ...)")
    if limit is not None:
        parts.append(f"first {limit}")
    return ", then ".join(parts) if parts else "all"


def _cell(row: dict[str, Any], field: str) -> str:
    value = row.get(field)
    if value is None:
        return "-"
    if field == "value":
        # Percent, as the report and import-generations print it (the store keeps fractions).
        std = row.get("value_std")
        return f"{100 * value:.2f}" + (f" ± {100 * std:.2f}" if std else "")
    return str(value)


def render_score_table(rows: Sequence[dict[str, Any]]) -> str:
    header = [name for name, _ in COLUMNS]
    body = [[_cell(r, f) for _, f in COLUMNS] for r in rows]
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    reasons = [
        r for r in rows if r.get("status") in ("skipped", "failed") and r.get("status_reason")
    ]
    for r in reasons:
        lines.append(
            f"  {r['status']} {r.get('template')}/{r.get('precision')}: {r['status_reason']}"
        )
    return "\n".join(lines)
