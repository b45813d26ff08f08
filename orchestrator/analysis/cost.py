"""Run-time arithmetic: throughput from finished settings, and durations as text. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any


def format_duration(seconds: float) -> str:
    """Whole seconds as "1h02m", "3m05s" or "42s" (negative values count as 0)."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def throughput(
    settings: Iterable[Mapping[str, Any]], scores: Mapping[str, Mapping[str, Any]]
) -> dict[tuple[str, str], dict[str, float]]:
    """Samples/s and mean engine load time per (model repo id, backend), from complete settings
    rows that recorded their generation time, with their scores rows (for the sample count)."""
    acc: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in settings:
        if row["status"] != "complete" or not row.get("generation_s"):
            continue
        score = scores.get(row["setting_key"])
        if score is None:
            continue
        a = acc[(row["model_repo_id"], row["backend"])]
        a["samples"] += score["n_problems"] * score["n_samples"]
        a["seconds"] += row["generation_s"]
        a["load_s"] += row.get("engine_load_s") or 0.0
        a["n"] += 1
    return {
        k: {"samples_per_s": v["samples"] / v["seconds"], "load_s": v["load_s"] / v["n"]}
        for k, v in acc.items()
        if v["seconds"] > 0
    }
