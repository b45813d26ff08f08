"""The LaTeX report's tables: one TexTable per snippet (`tex/<file>.tex`), naming the report
table it shows, the words around it, and how its columns read in a paper. Pure data; the
snippets are written by orchestrator.report.formats.tex.

Adding a table is one TexTable entry in TEX_TABLES: the report table it shows and the words
around it; the columns and headers default to what md and html show.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TexTable:
    """One snippet: `tex/<file>.tex`, the report table `table` as a booktabs tabular."""

    file: str  # the snippet's file stem (tex/<file>.tex)
    table: str  # the report table it shows (ReportTable.name)
    # what the standalone document says above it (plain text, no markup; `{metric}` and the
    # other display.phrases are filled from the store's benchmark cards)
    description: str
    columns: tuple[str, ...] | None = None  # None: the columns md and html show
    headers: Mapping[str, str] = field(default_factory=dict)  # column -> printed header
    long: bool = False  # a longtable, which breaks across pages (an appendix table)
    # columns shown once on a heading row above the rows that share their values, not on each
    # row ("family (adjustment: Holm; tests in family: 5)"); () : the report table's group_by
    heading: tuple[str, ...] = ()
    # column -> width of a ragged-right paragraph column it always wraps in (the others wrap
    # at tex.WRAP_WIDTH when a cell is longer than tex.WRAP_CHARS)
    wrap: Mapping[str, str] = field(default_factory=dict)
    # a column only a row with a test fills: when no row does (the findings of a store with
    # nothing tested), the standalone document lists the table's sentences instead
    tested_by: str | None = None


def _cols(text: str) -> tuple[str, ...]:
    return tuple(text.split())


ANSWER_HEADERS = {
    "literature_model": "model (as printed)",
    "source_id": "source",
    "verdict_detail": "verdict",
    "max_length": "max length",
    "score_pct": "{metric} % [CI]",
    "gap_pp": "gap (pp)",
    "setting_key": "setting",
}
TEX_TABLES: tuple[TexTable, ...] = (
    TexTable(
        "answers",
        "answers",
        "One row per value a paper or leaderboard reports for a model of this store: the "
        "verdict (reproduced by N settings: {reproduced}; tuning or variant confusion: only "
        "the other tuning's model, or the model's other benchmark variant, reproduces it; "
        "near: {near}; not reproduced; only a pilot subset), and the setting that best "
        "explains the value, with its {metric}, interval and gap (setting minus reported, "
        "percentage points). A note under a row says how its value was judged.",
        headers=ANSWER_HEADERS,
        # the texts wrap, so the table fits a landscape page at the text's size
        wrap={
            "literature_model": "7.2em",
            "source_id": "7.5em",
            "location": "8em",
            "verdict_detail": "8em",
        },
    ),
    TexTable(
        "findings",
        "findings",
        "One row per axis in the study's style, from its test: each axis value against the "
        "baseline's, over all models and over instruct models only, one vote per model, "
        "tested over problems jointly across models (a problem-clustered bootstrap interval "
        "and sign-flip test; exact McNemar for one model and one sample per problem), "
        "Holm-adjusted within its family; the sentence under each row. An effect counts when "
        "its adjusted p < 0.05 and |delta| exceeds the re-generation noise (repeat-check); "
        "for an axis without one, the largest |delta| and the change detectable at 80% power.",
        columns=_cols(
            "group topic values delta_pp p_adjusted n_models n_problem_pairs mdd_pp noise_pp counts"
        ),
        tested_by="p_adjusted",
        headers={
            "topic": "axis",
            "delta_pp": "change (pp) [CI]",
            "p_adjusted": "adjusted p",
            "n_models": "models",
            "n_problem_pairs": "problem pairs",
            "mdd_pp": "detectable (pp)",
            "noise_pp": "noise (pp)",
        },
    ),
    TexTable(
        "scores",
        "scores_pivot",
        "{metric} ({scale}) per model, template, decoding and maximum length (rows) and "
        "precision (columns), like the study's Table 2, each with its interval; a cell of "
        "several settings shows their mean.",
        headers={"max_length": "max length", "n_samples": "samples", "n_problems": "problems"},
    ),
    TexTable(
        "effects",
        "effects",
        "Pairs of settings of one model that differ only in one axis: the mean change "
        "against the baseline (percentage points, signed), the mean relative change (percent "
        "of the baseline score) and the mean magnitude, over all models and over instruct "
        "models only; one vote per model.",
        columns=_cols(
            "axis value baseline_value group n_models n_pairs mean_change_pp "
            "mean_relative_change_pct mean_abs_change_pp"
        ),
        headers={
            "baseline_value": "baseline",
            "n_models": "models",
            "n_pairs": "pairs",
            "mean_change_pp": "change (pp)",
            "mean_relative_change_pct": "relative (%)",
            "mean_abs_change_pp": "|change| (pp)",
        },
    ),
    TexTable(
        "grid",
        "grid",
        "Every complete setting with its {metric} and interval, the number of problems, and "
        "the samples whose prompt was truncated or that hit the length limit.",
        columns=_cols(
            "template decoding max_length precision backend n_samples score_pct n_problems "
            "n_prompt_truncated n_hit_length_limit setting_key"
        ),
        headers={
            "max_length": "max length",
            "n_samples": "samples",
            "score_pct": "{metric} % [CI]",
            "n_problems": "problems",
            "n_prompt_truncated": "truncated",
            "n_hit_length_limit": "length limit",
            "setting_key": "setting",
        },
        long=True,
    ),
    TexTable(
        "comparisons",
        "comparisons",
        "Every paired test of the report under its family (a heading row: the family, its "
        "adjustment and the number of tests in it): B (value) against A (baseline), the test "
        "(exact McNemar, or sign-flip permutation) with b (problems where only A does "
        "better) and c (only B), delta = B - A in points with its interval, the raw p "
        "and the p adjusted within the family (Holm for the axis effects, Westfall-Young "
        "max-T for a model's settings against its baseline, Benjamini-Hochberg for the "
        "exploratory ones), the change detectable at 80% power, and whether it counts "
        "(adjusted p < 0.05 and above the re-generation noise).",
        # a family's name, adjustment and size head its rows: as columns, the 16 would not
        # fit a landscape page at the appendix's size
        columns=_cols(
            "axis value baseline_value at method b c delta_pp p_value p_adjusted mdd_pp counts"
        ),
        heading=("family", "adjustment", "family_size"),
        wrap={"value": "8em", "baseline_value": "8em", "at": "9em", "method": "6.5em"},
        headers={
            "baseline_value": "baseline",
            "method": "test",
            "delta_pp": "change (pp) [CI]",
            "p_value": "p",
            "p_adjusted": "adjusted p",
            "family_size": "tests in family",
            "mdd_pp": "detectable (pp)",
        },
        long=True,
    ),
)
