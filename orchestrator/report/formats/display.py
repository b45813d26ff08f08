"""How the report's tables read in md, html and tex: titles, descriptions, which columns show,
which long texts move to a detail row, and how a value is written. CSV and JSON keep every
column at full precision; nothing here computes a metric.

Display rules: columns ending in `_pct` (percent) or `_pp` (percentage points) show two
decimals; setting keys, hashes and revisions show 12 characters; a score shown with its
interval reads "16.46 [10.37, 21.97]".
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from orchestrator.report.tables import wording
from orchestrator.report.tables.records import records

if TYPE_CHECKING:
    from orchestrator.report.tables.data import ReportData, ReportTable

SHORT = 12  # characters of a setting key, hash or revision in md/html/tex
FOLD_ROWS = 12  # html: a longer table folds into <details>
TABLES: dict[str, tuple[str, str]] = {
    "answers": (
        "Answers: which setting explains each published value",
        "One row per value a paper or leaderboard reports for a model of this store. verdict: "
        "reproduced by N settings ({reproduced}), tuning confusion (only the other tuning's "
        "model reproduces it), variant confusion (only the model's other benchmark variant "
        "does), near ({near}), not reproduced, or only a pilot subset "
        "(only settings over part of the problems were measured: no verdict). The "
        "setting is the one that best explains the value (the reproducing setting "
        "closest to it, else the closest setting), with its score, interval and gap "
        "(setting minus reported, percentage points). Beside the verdict, how much it "
        "proves: the coincidence rate (the share of the values a count could print with the "
        "same decimals within 5 points of it that some setting of the model would also "
        "reproduce: at most 20% is strong evidence, under 50% moderate, else weak) and the "
        "settings whose interval "
        "contains the value (n_in_interval).",
    ),
    "findings": (
        "Findings: what the grid's differences show, each with its test",
        "One sentence per axis, in the study's style, from the axis-effects families: each "
        "axis value against the baseline's, over all models and over instruct models only, one "
        "vote per model, tested over problems jointly across models (a problem-clustered "
        "bootstrap interval and sign-flip test; exact McNemar for one model and one sample "
        "per problem), Holm-adjusted within its family. An effect counts when its adjusted p "
        "< 0.05 and |delta| exceeds the re-generation noise measured by repeat-check. Every "
        "test, every family (each model's settings against its baseline: Westfall-Young "
        "max-T; exploratory: Benjamini-Hochberg) is in the comparisons table; "
        "docs/statistics.md says which test and why.",
    ),
    "scores_pivot": (
        "Scores per model",
        "{metric} ({scale}) per template x decoding x max length and precision, like "
        "the study's Table 2; hover a cell (html) for its interval, samples, "
        "problems and setting key. A cell of several settings shows their mean. "
        "Every setting, flat, is in the last sections and in grid.csv.",
    ),
    "literature": (
        "Reported values against the measured settings",
        "Each reported value of a model the store holds: {matching}; the settings that "
        "reproduce it, the near settings ({near}), the closest setting and its gap, tuning "
        "and variant confusion, and "
        "pilot settings (a subset of the problems), which are listed but never "
        "compared.",
    ),
    "literature_unmatched": (
        "Literature rows without measured settings",
        "Rows whose model name the mapping does not list (unmapped), whose "
        "model the store has not run (not in store), or has run only on "
        "another benchmark variant.",
    ),
    "unobtainable": (
        "Reported values that no k/(problems x samples) gives",
        "For every literature row of a benchmark whose values are counts (pass@1), whether "
        "or not the store holds its model: no k gives these printed values by rounding or "
        "flooring. Where the source does "
        'not say how it sampled, m = 1 is assumed and the row says "not '
        'obtainable with one sample per problem".',
    ),
    "effects": (
        "Effect of each setting against the baseline",
        "Pairs of settings of one model that differ only in one axis: mean change "
        "(percentage points, signed), mean relative change (percent of the baseline "
        "score) and mean magnitude, over all models and over instruct models only. One "
        "vote per model: settings of one cell (same axes) count once, at their mean, "
        "and a model's vote is the mean of its pairs; n_models counts the votes.",
    ),
    "effect_pairs": (
        "Effect pairs per model",
        "Each baseline cell and a cell that changes one axis, with their settings.",
    ),
    "comparisons": (
        "Every comparison, with its paired test and its family",
        "One row per test: B (value) against A (baseline_value), delta = B - A in points. "
        "b: problems where only A does better, c: only B. method: exact McNemar (one sample "
        "per problem on both sides) or sign-flip permutation (scores per problem; "
        "exhaustive when few problems differ); the interval is a percentile bootstrap over "
        "problems. p_value raw, p_adjusted within the family (adjustment, family_size); "
        "mdd_pp: the smallest |delta| the test detects with 80% power at alpha 0.05; "
        "noise_pp: the re-generation noise of the backends involved (empty: not measured); "
        "significant: p_adjusted < 0.05; counts: significant and above the noise.",
    ),
    "precision_spread": (
        "Spread across precision and quantization, per decoding",
        "Population standard deviation (percentage points) across the "
        "precision settings of one model with every other axis fixed. One vote "
        "per model (the mean of its groups), over all and over instruct "
        "models; the largest single group; and the increase of the mean spread "
        "over greedy's, in percent (the study's +22.99% and +50.40%).",
    ),
    "precision_spread_by_model": (
        "Spread across precision and quantization, per model",
        "Each group of cells that differ only in precision.",
    ),
    "grid": (
        "Every setting",
        "score_pct: the setting's headline metric in percent ({headline}; from the exact "
        "counts the scores table stores), with its bootstrap interval over problems; and "
        "the number of samples whose prompt was "
        "truncated, that hit the length limit, or whose harness slice was misaligned. "
        "backend: where the generations come from (an imported file: the backend it "
        "claims); generated_by: what made the stored generations (replay for an import).",
    ),
    "length_limits": (
        "Prompt truncation and length-limit hits",
        "Settings with at least one truncated prompt, length-limit hit or decode "
        "mismatch (counts of samples).",
    ),
    "skipped_failed": (
        "Skipped and failed settings",
        "Settings planned out with a reason (skipped) or that failed (the error).",
    ),
    "provenance_settings": (
        "Provenance of the measured settings",
        "Model revision, backend and version, device, effective dtype, "
        "tokenizer and data hashes, host and library versions, with the "
        "number of settings sharing them.",
    ),
    "provenance_runs": ("Runs that wrote the store", "The runs table: one row per command."),
}
HIDDEN = frozenset({"reproduced_by_keys", "closest_key", "exact", "in_interval"})


@dataclass(frozen=True)
class Display:
    columns: tuple[str, ...] | None = None  # None: every column but HIDDEN
    details: tuple[str, ...] = ()  # html/tex: a row under the row (labelled by header); md: last
    # columns
    fold_rows: int | None = FOLD_ROWS  # html: fold into <details> beyond this; None: never
    interval: bool = False  # score_pct shows ci_low_pct/ci_high_pct with it
    percent: bool = False  # every number is a percentage (two decimals): the pivot's cells
    headers: Mapping[str, str] = field(default_factory=dict)
    sentences: str | None = None  # md/html/tex: this column as a list, not a table
    # shown only when they take more than one value in the table (e.g. the benchmark of a
    # store holding one)
    varying: tuple[str, ...] = ()


def _cols(text: str) -> tuple[str, ...]:
    return tuple(text.split())


DISPLAY: dict[str, Display] = {
    "answers": Display(
        _cols(
            "benchmark literature_model reported source_id location verdict_detail template "
            "decoding max_length precision backend score_pct gap_pp setting_key"
        ),
        # obtainability: only a value no count k/n gives; match: how the spread rule judged it
        details=("obtainability_note", "match_note", "evidence"),
        fold_rows=None,
        interval=True,
        headers={
            "verdict_detail": "verdict",
            "score_pct": "score_pct [interval]",
            "obtainability_note": "obtainability",
            "match_note": "match",
        },
        varying=("benchmark",),
    ),
    # md and html: the sentences; tex: a tabular of the tests, each sentence under its row
    "findings": Display(
        _cols(
            "group topic values delta_pp p_adjusted adjustment family_size n_models "
            "n_problem_pairs mdd_pp noise_pp counts"
        ),
        details=("sentence",),
        interval=True,
        sentences="sentence",
        headers={"delta_pp": "delta_pp [interval]"},
    ),
    "comparisons": Display(
        _cols(
            "scope family group axis value baseline_value at n_models method b c delta_pp "
            "p_value p_adjusted adjustment family_size mdd_pp noise_pp significant counts"
        ),
        fold_rows=12,
        interval=True,
        headers={"delta_pp": "delta_pp [interval]"},
        # a store of one benchmark has one scope: its column would only take width
        varying=("scope",),
    ),
    "scores_pivot": Display(fold_rows=None, percent=True),
    "literature": Display(
        _cols(
            "benchmark literature_model reported source_id obtainability reported_spread "
            "status tuning_confusion variant_confusion n_reproducing closest_setting "
            "closest_pct closest_gap_pp "
            "counterpart_model other_variant"
        ),
        details=_cols(
            "location obtainable_as reproduced_by near counterpart_reproduced_by "
            "other_variant_reproduced_by pilots"
        ),
        varying=("benchmark",),
    ),
    "unobtainable": Display(
        _cols(
            "benchmark literature_model reported source_id location obtainability "
            "n_samples_reported nearest"
        ),
        details=("setting_notes",),
        fold_rows=0,  # about the literature, not the store: folded whatever its length
        varying=("benchmark",),
    ),
    "literature_unmatched": Display(fold_rows=0, varying=("benchmark",)),
    "effects": Display(fold_rows=40),
    "grid": Display(
        _cols(
            "template template_kind decoding max_length precision backend generated_by "
            "n_samples metric score_pct n_problems subset n_passed n_prompt_truncated "
            "n_hit_length_limit n_decode_mismatch n_timeout setting_key"
        ),
        interval=True,
        headers={"score_pct": "score_pct [interval]"},
    ),
    "skipped_failed": Display(
        _cols(
            "model_name status template decoding max_length precision backend error_type "
            "attempts setting_key"
        ),
        details=("status_reason",),
    ),
    "provenance_settings": Display(
        _cols(
            "model_name model_repo_id model_revision backend backend_version device "
            "effective_dtype tokenizer_sha256 chat_template_sha256 data_sha256 hostname "
            "n_settings"
        ),
        details=("library_versions",),
    ),
    "provenance_runs": Display(
        _cols(
            "run_id command started_at finished_at status git_revision hostname n_generated "
            "n_executed cluster_address"
        ),
        details=("library_versions", "data_sources_json"),
    ),
}
PLAIN = Display()  # a table without a display of its own (one, shared: it is frozen)
_HEX = re.compile(r"^[0-9a-f]{13,}$")


def display_of(name: str) -> Display:
    return DISPLAY.get(name, PLAIN)


def shown_columns(
    frame: pd.DataFrame, name: str, group_by: str | None = None, whole: pd.DataFrame | None = None
) -> list[str]:
    """The columns md/html/tex show, in order (details excluded; a `varying` column only when
    it takes several values in the `whole` table, of which `frame` may be a part)."""
    spec = display_of(name)
    wanted = spec.columns or tuple(c for c in frame.columns if c not in HIDDEN)
    table = whole if whole is not None else frame
    same = {c for c in spec.varying if c in table and table[c].dropna().nunique() <= 1}
    skip = {group_by, *spec.details, *same}
    return [c for c in wanted if c in frame.columns and c not in skip]


def header(name: str, column: str) -> str:
    return display_of(name).headers.get(column, column)


def is_missing(value: Any) -> bool:
    if value is None or value is pd.NaT or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _short(text: str) -> str:
    return " ".join(part[:SHORT] for part in re.split(r"[ ,]+", text.strip()))


def format_cell(column: str, value: Any) -> str:
    """Display text of one value (md/tex/html)."""
    return _formatter(column)(value)


def _general(column: str, value: Any) -> str:
    """`format_cell` by the rules, for any value."""
    if is_missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if column.endswith(("_pct", "_pp")) and isinstance(value, (int, float)):
        return f"{value:.2f}"
    if isinstance(value, str) and (
        column.endswith(("_key", "_keys", "_sha256", "git_revision"))
        or (column == "model_revision" and _HEX.match(value))
    ):
        return _short(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    if isinstance(value, pd.Timestamp):
        return value.isoformat(timespec="seconds")
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


@functools.cache
def _formatter(column: str) -> Callable[[Any], str]:
    """`format_cell` for one column: what its name decides is decided once (a report at 6,000
    settings formats half a million cells, twice), and text, floats and ints take a path by
    their exact type that gives what `_general` gives (tested)."""
    percent = column.endswith(("_pct", "_pp"))
    hashed = column.endswith(("_key", "_keys", "_sha256", "git_revision"))
    revision = column == "model_revision"

    def text(value: Any) -> str:
        kind = type(value)
        if kind is str:
            return _short(value) if hashed or (revision and _HEX.match(value)) else value
        if kind is float and value == value:  # NaN is missing: `_general`
            if percent:
                return f"{value:.2f}"
            return str(int(value)) if value.is_integer() else f"{value:.4g}"
        if kind is int:
            return f"{value:.2f}" if percent else int.__repr__(value)
        return _general(column, value)

    return text


def value_and_interval(name: str, column: str, row: Mapping[str, Any]) -> tuple[str, str]:
    """A row's cell as (value text, interval text): the interval is "[10.37, 21.97]" for the
    score of a table that shows one, else ""."""
    value = row.get(column)
    if display_of(name).percent and isinstance(value, float) and not math.isnan(value):
        return f"{value:.2f}", ""
    text = format_cell(column, value)
    if column in INTERVAL_OF and display_of(name).interval and text:
        low_column, high_column = INTERVAL_OF[column]
        low, high = row.get(low_column), row.get(high_column)
        if not is_missing(low) and not is_missing(high):
            return text, f"[{format_cell(low_column, low)}, {format_cell(high_column, high)}]"
    return text, ""


# a value and the columns of its interval (shown with it where the display has `interval`)
INTERVAL_OF = {"score_pct": ("ci_low_pct", "ci_high_pct"), "delta_pp": ("ci_low_pp", "ci_high_pp")}


def cell_text(name: str, column: str, row: Mapping[str, Any]) -> str:
    """A row's cell as shown: a score with its interval where the table shows one."""
    text, interval = value_and_interval(name, column, row)
    return f"{text} {interval}" if interval else text


def title(name: str) -> str:
    return TABLES.get(name, (name, ""))[0]


def scored_problems(data: ReportData) -> dict[str, list[int]]:
    """Per benchmark, the numbers of problems the grid's scored settings hold (none without a
    grid table)."""
    grid = next((t.frame for t in data.tables if t.name == "grid"), None)
    if grid is None or grid.empty:
        return {}
    scored = grid[grid["score_pct"].notna() & grid["n_problems"].notna()]
    out: dict[str, list[int]] = {}
    for benchmark, n in zip(scored["benchmark"], scored["n_problems"], strict=True):
        out.setdefault(str(benchmark), []).append(int(n))
    return out


def phrases(data: ReportData) -> dict[str, str]:
    """The card-driven words the descriptions are written with (report/wording.py), the scale
    in the problems the store's settings hold."""
    cards = data.cards
    return {
        "metric": wording.metric(cards),
        "scale": wording.scale(cards, scored_problems(data)),
        "reproduced": wording.reproduced(cards),
        "near": wording.near(cards),
        "matching": wording.matching(cards),
        "headline": wording.headline(cards),
    }


def description(data: ReportData, name: str) -> str:
    text = TABLES.get(name, (name, ""))[1].format(**phrases(data))
    if name == "effects":
        base = ", ".join(f"{k}={v}" for k, v in data.options["baseline"].items())
        text = f"Baseline: {base}. {text}"
    if name in ("findings", "comparisons"):
        o = data.options
        text += (
            f" Resampling: {o['n_resamples']} resamples, seed {o['seed']}; intervals at "
            f"{o['confidence']:.0%}."
        )
    if name in INTERVAL_TABLES:
        text += " " + interval_note(data)
    return text


INTERVAL_TABLES = ("grid", "answers", "scores_pivot")  # tables whose scores carry an interval


def interval_note(data: ReportData) -> str:
    """How the intervals were computed, as the tables that show them say it."""
    o = data.options
    return (
        f"Intervals: {o['confidence']:.0%} percentile bootstrap over problems, "
        f"{o['n_resamples']} resamples, seed {o['seed']}."
    )


def notes_after(data: ReportData) -> str | None:
    """The section the notes follow: the findings where the report has them (right after the
    answers), else the first."""
    names = [t.name for t in data.tables]
    if "findings" in names:
        return "findings"
    return names[0] if names else None


def sentence_list(name: str, frame: pd.DataFrame) -> list[str] | None:
    """The sentences of a table shown as a list (md/html/tex), None for other tables."""
    column = display_of(name).sentences
    if column is None:
        return None
    return [str(v) for v in frame[column]] if column in frame.columns else []


@dataclass(frozen=True)
class Part:
    """A (sub-)table as md and html show it: its group's value (None: the whole table), its
    frame (`groups`) and that frame's rows as records."""

    group: str | None
    frame: pd.DataFrame
    rows: list[dict[str, Any]]


class TableParts:
    """Each table's parts, split and read into records once for every format of a report (at
    6,000 settings the split and the records took about 1 s, and md and html each did both)."""

    def __init__(self) -> None:
        self._held: dict[str, list[Part]] = {}

    def __call__(self, table: ReportTable) -> list[Part]:
        if table.name not in self._held:
            self._held[table.name] = [
                Part(group, frame, records(frame))
                for group, frame in groups(table.frame, table.group_by)
            ]
        return self._held[table.name]


def groups(frame: pd.DataFrame, by: str | None):
    """(group value or None, rows) in the frame's order; columns empty for every row of a group
    are left out of it (a model without int8 settings has no int8 column)."""
    if by is None or frame.empty:
        yield None, frame
        return
    for value, part in frame.groupby(by, sort=False):
        part = part.drop(columns=[by])
        yield str(value), part.loc[:, part.notna().any(axis=0)]
