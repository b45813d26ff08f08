"""The report's figures as PNG bytes (matplotlib's object API on the Agg canvas: no pyplot, no
global backend switch, no display needed).

* `literature_figure`: per model, the range of measured scores with each setting as a dot, and
  the values papers report as markers coloured by their verdict, each labelled with its value
  and source (the study's Figure 1 idea). `literature_labels` is what the labels say and
  where they stack.
* `effects_figure`: per axis, the mean change against the baseline for each value (all models
  and instruct models, each bar labelled with its value), with each model's vote as a dot, on
  one shared scale so panels compare (the study's Figure 2 idea). `effects_layout` is what it
  draws.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from orchestrator.analysis.answers import Verdict
from orchestrator.analysis.baseline import AXES
from orchestrator.analysis.effects import EffectPair, model_votes, summarize_effects
from orchestrator.report.tables.data import ModelLiterature

STATUS_STYLE = {
    Verdict.REPRODUCED: ("#1a9850", "o", "reproduced"),
    Verdict.NEAR: ("#f39c12", "D", "within one problem"),
    Verdict.NOT_REPRODUCED: ("#d73027", "X", "not reproduced"),
    Verdict.TUNING_CONFUSION: ("#7b3294", "P", "only the other tuning's model reproduces it"),
    Verdict.VARIANT_CONFUSION: ("#01665e", "*", "only another benchmark variant reproduces it"),
    Verdict.PILOT_ONLY: ("#888888", "s", "only a pilot subset measured"),
}
DPI = 110
WIDTH_IN = 10.0
LABEL_PT = 7.0
CHAR_IN = 0.55 * LABEL_PT / 72  # average width of a label character, inches
LEVEL = 0.28  # data units between stacked label lines
MAX_LEVELS = 6
VOTE_AREA = 22  # a model's vote marker, points^2
LEGEND_ROW_IN = 0.19  # a legend row at 8 pt, inches


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


@dataclass(frozen=True)
class Label:
    model_name: str
    value: float
    text: str  # "16.4 arXiv:2308.07124"
    level: int  # 0: just above the marker; higher levels stack upwards


def _x_range(models: Sequence[ModelLiterature]) -> tuple[float, float]:
    xs = [v.value for m in models for v in m.reported] + [s for m in models for s in m.scores_pct]
    low, high = min(xs), max(xs)
    pad = max(1.0, (high - low) * 0.04)
    return max(0.0, low - pad), min(100.0, high + pad)


def literature_labels(models: Sequence[ModelLiterature]) -> list[Label]:
    """Each reported value's label, stacked so that labels of one model do not overlap: a
    label takes the lowest level whose previous label ends before it starts (widths estimated
    from the character count at the figure's scale)."""
    models = [m for m in models if m.reported]
    if not models:
        return []
    low, high = _x_range(models)
    per_inch = (high - low) / (WIDTH_IN * 0.72)  # the axes take about 72% of the width
    labels = []
    for model in models:
        ends: list[float] = []  # per level, where its last label ends
        for v in sorted(model.reported, key=lambda r: r.value):
            text = f"{v.value_text} {v.source_id}"
            width = (len(text) + 1) * CHAR_IN * per_inch
            level = next((i for i, end in enumerate(ends) if end <= v.value), len(ends))
            level = min(level, MAX_LEVELS - 1)
            if level == len(ends):
                ends.append(v.value + width)
            else:
                ends[level] = v.value + width
            labels.append(Label(model.model_name, v.value, text, level))
    return labels


def literature_figure(models: Sequence[ModelLiterature], metric: str = "score") -> bytes | None:
    """`models`: per model its scores and reported values; `metric` names the x axis (the
    cards' headline, report/wording.py). None when no model has one."""
    models = [m for m in models if m.reported]
    if not models:
        return None
    labels = literature_labels(models)
    levels = {
        m.model_name: 1 + max(lb.level for lb in labels if lb.model_name == m.model_name)
        for m in models
    }
    ys, y = {}, 0.0
    for m in models:  # each row leaves room above it for its stacked labels
        y += 0.45 + LEVEL * levels[m.model_name]
        ys[m.model_name] = y
        y += 0.45
    figure = Figure(figsize=(WIDTH_IN, 1.2 + 0.55 * y))
    ax = figure.add_subplot()
    seen: set[str] = set()
    for m in models:
        _draw_model(ax, m, ys[m.model_name], seen)
    for lb in labels:
        top = ys[lb.model_name] - 0.22 - LEVEL * lb.level
        ax.plot(
            [lb.value, lb.value],
            [ys[lb.model_name] - 0.12, top + 0.05],
            color="#999",
            linewidth=0.5,
            zorder=2,
        )
        ax.text(lb.value, top, lb.text, fontsize=LABEL_PT, va="bottom", ha="left", zorder=5)
    ax.set_yticks([ys[m.model_name] for m in models], [m.model_name for m in models])
    ax.set_ylim(y, 0)
    ax.set_xlim(*_x_range(models))
    ax.set_xlabel(f"{metric} (%)")
    ax.set_title("Reported values (value and source) against the measured settings")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.25 / max(1.0, y / 3)),
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    return _png(figure)


def _draw_model(ax, model: ModelLiterature, y: float, seen: set[str]) -> None:
    if model.scores_pct:
        low, high = min(model.scores_pct), max(model.scores_pct)
        first = "range" not in seen
        ax.plot(
            [low, high],
            [y, y],
            color="#c6dbef",
            linewidth=7,
            solid_capstyle="round",
            zorder=1,
            label="range of the measured settings" if first else None,
        )
        ax.scatter(
            model.scores_pct,
            [y] * len(model.scores_pct),
            s=16,
            color="#08306b",
            edgecolors="white",
            linewidths=0.6,
            zorder=3,
            label="a measured setting" if first else None,
        )
        seen.add("range")
    for v in model.reported:
        colour, marker, label = STATUS_STYLE.get(Verdict(v.status), ("#555555", "s", v.status))
        ax.scatter(
            [v.value],
            [y],
            s=80,
            color=colour,
            marker=marker,
            edgecolors="black",
            linewidths=0.5,
            zorder=4,
            label=None if v.status in seen else f"reported: {label}",
        )
        seen.add(v.status)


@dataclass(frozen=True)
class Bar:
    value: str  # the axis value, as its tick label
    n_models: int
    mean_all_pp: float
    mean_instruct_pp: float | None
    votes: tuple[tuple[str, float], ...]  # (model, its mean change)


@dataclass(frozen=True)
class Panel:
    axis: str
    baseline: str
    bars: tuple[Bar, ...]


def effects_layout(pairs: Sequence[EffectPair]) -> list[Panel]:
    """What `effects_figure` draws: per analysed axis, per value, the two means and the votes."""
    rows = summarize_effects(pairs)
    votes = model_votes(pairs)
    panels = []
    for axis in [a for a in AXES if any(r.axis == a for r in rows)]:
        mine = [r for r in rows if r.axis == axis]
        bars = []
        for r in (r for r in mine if r.group == "all"):
            instruct = next((i for i in mine if i.value == r.value and i.group == "instruct"), None)
            bars.append(
                Bar(
                    value=str(r.value),
                    n_models=r.n_models,
                    mean_all_pp=r.mean_change_pp,
                    mean_instruct_pp=instruct.mean_change_pp if instruct else None,
                    votes=tuple(
                        (v.model_name, v.change_pp)
                        for v in votes
                        if v.axis == axis and v.value == r.value
                    ),
                )
            )
        panels.append(Panel(axis, str(mine[0].baseline_value), tuple(bars)))
    return panels


def _limits(panels: Sequence[Panel]) -> tuple[float, float]:
    ys = [0.0]
    for p in panels:
        for b in p.bars:
            ys += [b.mean_all_pp, *(c for _, c in b.votes)]
            ys += [b.mean_instruct_pp] if b.mean_instruct_pp is not None else []
    low, high = min(ys), max(ys)
    pad = max(0.5, (high - low) * 0.18)
    return low - pad, high + pad


def effects_figure(pairs: Sequence[EffectPair], metric: str = "score") -> bytes | None:
    """One panel per analysed axis, on one y scale. None when the store has no pairs."""
    panels = effects_layout(pairs)
    if not panels:
        return None
    models = sorted({m for p in panels for b in p.bars for m, _ in b.votes})
    palette = {m: f"C{i % 10}" for i, m in enumerate(models)}
    widths = [max(1, len(p.bars)) + 0.6 for p in panels]
    columns = min(6, 2 + len(models))
    legend_in = LEGEND_ROW_IN * math.ceil((2 + len(models)) / columns) + 0.1
    height = 4.6 + legend_in  # the legend below the panels, never over their labels
    figure = Figure(figsize=(min(16.0, 1.3 * sum(widths) + 2.0), height))
    grid = figure.add_gridspec(1, len(panels), width_ratios=widths)
    low, high = _limits(panels)
    for i, panel in enumerate(panels):
        ax = figure.add_subplot(grid[0, i])
        _draw_panel(ax, panel, palette, metric if i == 0 else None)
        ax.set_ylim(low, high)
        if i:
            ax.tick_params(labelleft=False)
    figure.suptitle("Effect of each setting against the baseline (one vote per model)")
    figure.legend(
        *_legend(figure, palette),
        loc="lower center",
        ncol=columns,
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 0.0),
    )
    figure.tight_layout(rect=(0, legend_in / height, 1, 1))
    return _png(figure)


def _legend(figure: Figure, palette: dict[str, str]) -> tuple[list, list[str]]:
    """A marker per model (the votes are one collection per panel), then the bars' entries."""
    handles: list = []
    names: list[str] = []
    for model, colour in palette.items():
        handles.append(
            Line2D(
                [],
                [],
                linestyle="",
                marker="o",
                markersize=math.sqrt(VOTE_AREA),  # a scatter's size is an area in points^2
                markerfacecolor=colour,
                markeredgecolor="black",
                markeredgewidth=0.5,
            )
        )
        names.append(model)
    for ax in figure.axes:
        for h, n in zip(*ax.get_legend_handles_labels(), strict=True):
            if n not in names:
                handles.append(h)
                names.append(n)
    return handles, names


def _draw_panel(ax, panel: Panel, palette: dict[str, str], metric: str | None) -> None:
    """One axis's bars; `metric`: the y label, on the first panel only."""
    xs: list[float] = []
    ys: list[float] = []
    colours: list[str] = []
    for j, bar in enumerate(panel.bars):
        for value, offset, colour, group in (
            (bar.mean_all_pp, -0.19, "#4575b4", "all"),
            (bar.mean_instruct_pp, 0.19, "#f46d43", "instruct"),
        ):
            if value is None:
                continue
            ax.bar(
                j + offset,
                value,
                width=0.36,
                color=colour,
                alpha=0.85,
                label=f"mean, {group} models",
            )
            ax.annotate(
                f"{value:+.2f}",
                (j + offset, value),
                xytext=(0, 3 if value >= 0 else -9),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )
        for k, (model, change) in enumerate(bar.votes):
            xs.append(j - 0.19 + (k - (len(bar.votes) - 1) / 2) * 0.05)  # jittered
            ys.append(change)
            colours.append(palette[model])
    if xs:  # one collection for every vote (matplotlib's cost is per call, not per point)
        ax.scatter(xs, ys, s=VOTE_AREA, c=colours, edgecolors="black", linewidths=0.5, zorder=3)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(
        range(len(panel.bars)),
        [f"{b.value}\n({b.n_models} model{'s' if b.n_models != 1 else ''})" for b in panel.bars],
        fontsize=8,
    )
    ax.set_xlim(-0.7, len(panel.bars) - 0.3)
    ax.set_title(f"{panel.axis} (baseline {panel.baseline})", fontsize=10)
    ax.set_ylabel(f"change in {metric} (percentage points)" if metric else "")
    ax.grid(axis="y", alpha=0.3)
