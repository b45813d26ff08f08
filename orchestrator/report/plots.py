"""The report's figures as PNG bytes (matplotlib's object API on the Agg canvas: no pyplot, no
global backend switch, no display needed).

* `literature_figure`: per model, the range of measured scores with each setting as a dot, and
  the values papers report as markers coloured by whether a setting reproduces them (the study's
  Figure 1 idea).
* `effects_figure`: per axis, the mean change against the baseline for each value (all models
  and instruct models), with each model's change as a dot (the study's Figure 2 idea).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from orchestrator.analysis.effects import AXES, EffectPair, summarize_effects

STATUS_STYLE = {
    "reproduced": ("#1a9850", "o", "reproduced"),
    "near": ("#fdae61", "D", "within one problem"),
    "not reproduced": ("#d73027", "X", "not reproduced"),
    "tuning confusion": ("#7b3294", "P", "only the other tuning's model reproduces it"),
}
DPI = 110


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


def literature_figure(models: Sequence) -> bytes | None:
    """`models`: report.ModelLiterature items. None when no model has literature values."""
    models = [m for m in models if m.reported]
    if not models:
        return None
    figure = Figure(figsize=(9, 0.8 + 0.6 * len(models)))
    ax = figure.add_subplot()
    seen = set()
    for y, model in enumerate(models):
        if model.scores_pct:
            low, high = min(model.scores_pct), max(model.scores_pct)
            ax.plot([low, high], [y, y], color="#9ecae1", linewidth=9, solid_capstyle="butt",
                    label=None if "range" in seen else "measured range")  # fmt: skip
            ax.scatter(model.scores_pct, [y] * len(model.scores_pct), s=10, color="#08519c",
                       zorder=3, label=None if "range" in seen else "a setting")  # fmt: skip
            seen.add("range")
        for value, _source, status in model.reported:
            colour, marker, label = STATUS_STYLE.get(status, ("#555555", "s", status))
            ax.scatter([value], [y], s=70, color=colour, marker=marker, edgecolors="black",
                       linewidths=0.5, zorder=4,
                       label=None if status in seen else f"reported: {label}")  # fmt: skip
            seen.add(status)
    ax.set_yticks(range(len(models)), [m.model_name for m in models])
    ax.set_ylim(-0.7, len(models) - 0.3)
    ax.invert_yaxis()
    ax.set_xlabel("pass@1 (%)")
    ax.set_title("Reported values against the range of measured settings")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / len(models)), ncol=3,
              fontsize=8, frameon=False)  # fmt: skip
    return _png(figure)


def effects_figure(pairs: Sequence[EffectPair]) -> bytes | None:
    """One panel per analysed axis. None when the store has no one-axis pairs."""
    if not pairs:
        return None
    rows = summarize_effects(pairs)
    axes_present = [a for a in AXES if any(r.axis == a for r in rows)]
    figure = Figure(figsize=(4.2 * len(axes_present), 4.2))
    for i, axis in enumerate(axes_present):
        ax = figure.add_subplot(1, len(axes_present), i + 1)
        values = [r.value for r in rows if r.axis == axis and r.group == "all"]
        for j, value in enumerate(values):
            for group, offset, colour in (("all", -0.18, "#4575b4"), ("instruct", 0.18, "#f46d43")):
                row = next((r for r in rows if r.axis == axis and r.value == value
                            and r.group == group), None)  # fmt: skip
                if row is not None:
                    ax.bar(j + offset, row.mean_change_pp, width=0.34, color=colour, alpha=0.8,
                           label=f"mean, {group} models" if j == 0 else None)  # fmt: skip
            deltas = [p.change_pp for p in pairs if p.axis == axis and p.value == value]
            ax.scatter([j] * len(deltas), deltas, s=12, color="black", zorder=3,
                       label="one model" if j == 0 else None)  # fmt: skip
        ax.axhline(0, color="grey", linewidth=0.8)
        baseline = next(r.baseline_value for r in rows if r.axis == axis)
        ax.set_xticks(range(len(values)), [str(v) for v in values])
        ax.set_xlim(-0.8, len(values) - 0.2)
        ax.set_title(f"{axis} (baseline {baseline})", fontsize=10)
        ax.set_ylabel("change in pass@1 (percentage points)" if i == 0 else "")
        ax.grid(axis="y", alpha=0.3)
        if i == 0:
            ax.legend(fontsize=7)
    figure.suptitle("Effect of each setting against the baseline")
    figure.tight_layout()
    return _png(figure)
