"""The report's tables as md, html and tex show them: each table's title and description
(TABLES), and which columns it shows, which long texts go to a detail row, where it folds
and how its headers read (DISPLAY). Data only: display.py writes the cells."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

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


def title(name: str) -> str:
    return TABLES.get(name, (name, ""))[0]
