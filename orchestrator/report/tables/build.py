"""Assembling a report from a store: the grid, the literature join, effects, skips, provenance.

Everything numeric is computed here, in grid.py and evidence.py, or in the pure analysis modules
they call (literature, effects, intervals, the paired tests); render.py only formats. Tables are
pandas DataFrames named as in docs/report.md.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from orchestrator.analysis.baseline import AXES, check_baseline_in_store
from orchestrator.analysis.effects import (
    EffectPair,
    EffectRow,
    cells,
    effect_pairs,
    summarize_effects,
)
from orchestrator.analysis.intervals import ProblemCounts
from orchestrator.analysis.literature import LiteratureMatch
from orchestrator.analysis.literature_records import (
    MATCH_COLUMNS,
    UNMATCHED_COLUMNS,
    UNOBTAINABLE_COLUMNS,
    match_record,
    obtainability_counts,
    unmatched_record,
    unobtainable_record,
)
from orchestrator.analysis.spread import (
    SpreadGroup,
    SpreadSummary,
    precision_spread,
    summarize_spread,
)
from orchestrator.report.tables.answers import answers_frame, no_answers_reason
from orchestrator.report.tables.data import (
    ModelLiterature,
    ReportData,
    ReportedValue,
    ReportOptions,
    ReportTable,
)
from orchestrator.report.tables.evidence import evidence_tables
from orchestrator.report.tables.grid import COUNTS_DERIVED, KIND_STORED, grid_frame, read_frame
from orchestrator.report.tables.mismatch import mismatch_notes
from orchestrator.report.tables.pivot import pivot_table
from orchestrator.report.tables.provenance import provenance_tables, skipped_table
from orchestrator.report.tables.published import Published, all_matches, published, store_cards
from orchestrator.report.tables.records import records
from orchestrator.report.tables.wording import counted
from storage.schema import SettingStatus
from storage.store import Store
from workers.card import BenchmarkCard

logger = logging.getLogger(__name__)
LIMIT_COLUMNS = tuple(
    """model_name template_kind decoding max_length precision backend n_problems n_samples
    n_prompt_truncated n_hit_length_limit n_decode_mismatch setting_key""".split()
)
NO_SCORES = "The store holds no complete setting with a score."


# ---------------------------------------------------------------------------------------------
# Tables


def _records(items: Sequence[Any], kind: type) -> pd.DataFrame:
    """A DataFrame from dataclass instances of `kind` (tuples become space-separated lists);
    with no items, the columns still."""
    columns = [f.name for f in dataclasses.fields(kind)]
    rows = [
        {
            k: " ".join(map(str, v)) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(i).items()
        }
        for i in items
    ]
    return pd.DataFrame(rows, columns=columns)


def _grid_tables(grid: pd.DataFrame) -> list[ReportTable]:
    shown = grid.drop(columns=["exact"])
    counts = ["n_prompt_truncated", "n_hit_length_limit", "n_decode_mismatch"]
    hit = (shown[counts].fillna(0) > 0).any(axis=1)
    limits = shown.loc[hit, list(LIMIT_COLUMNS)].reset_index(drop=True)
    no_limits = (
        "No prompt was truncated, no generation hit the length limit and no harness slice was "
        "misaligned."
    )
    return [
        ReportTable("grid", shown, group_by="model_name", empty_reason=NO_SCORES),
        ReportTable("length_limits", limits, empty_reason=NO_SCORES if grid.empty else no_limits),
    ]


def _literature_figure(
    answers: pd.DataFrame, grid: pd.DataFrame, cards: Mapping[str, BenchmarkCard]
) -> list[ModelLiterature]:
    """Per model (and benchmark, in a store of several: the label names it) its measured
    scores of that benchmark's headline and the values published for it."""
    figure = []
    keys = ["model_name", "benchmark"]
    for (model, benchmark), part in answers.groupby(keys, sort=True) if len(answers) else []:
        mine = (grid["model_name"] == model) & (grid["benchmark"] == benchmark)
        scores = grid.loc[mine & (grid["metric"] == cards[benchmark].metric), "score_pct"]
        reported = tuple(
            ReportedValue(r["reported"], r["source_id"], r["verdict"]) for r in records(part)
        )
        label = f"{model} ({cards[benchmark].title})" if len(cards) > 1 else str(model)
        figure.append(ModelLiterature(label, tuple(float(s) for s in scores.dropna()), reported))
    return figure


def _literature_tables(
    parts: Sequence[Published], grid: pd.DataFrame, confidence: float
) -> tuple[list[ReportTable], list[ModelLiterature]]:
    matches = all_matches(parts)
    compared = sorted(
        (m for m in matches if m.own is not None),
        key=lambda m: (m.model_name or "", m.benchmark, m.row.line),
    )
    unmatched = [unmatched_record(m) for m in matches if m.own is None]
    unobtainable = [
        unobtainable_record(m)
        for m in matches
        if m.obtainability is not None and not m.obtainability.obtainable
    ]
    reason = no_answers_reason(grid, parts)
    scores = [s for p in parts for s in p.scores]
    answers = answers_frame(matches, grid, scores, confidence=confidence)
    cards = {p.card.benchmark: p.card for p in parts}
    tables = [
        ReportTable("answers", answers, group_by="model_name", empty_reason=reason),
        ReportTable(
            "literature",
            pd.DataFrame([match_record(m) for m in compared], columns=list(MATCH_COLUMNS)),
            group_by="model_name",
            empty_reason=reason,
        ),
        ReportTable(
            "literature_unmatched",
            pd.DataFrame(unmatched, columns=list(UNMATCHED_COLUMNS)),
            empty_reason="Every literature row names a model of this store."
            if parts
            else "No benchmark of this store has published values to compare.",
        ),
    ]
    if counted(list(cards.values())):  # only a count k/n can be unobtainable
        tables.append(
            ReportTable(
                "unobtainable",
                pd.DataFrame(unobtainable, columns=list(UNOBTAINABLE_COLUMNS)),
                empty_reason="Every reported value is some k/(problems x samples).",
            )
        )
    return tables, _literature_figure(answers, grid, cards)


def _none_if_nan(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and value != value) else value


def _effect_rows(grid: pd.DataFrame) -> list[dict[str, Any]]:
    """The grid as the effects and spread functions read it (score exact, template kind)."""
    return [
        {
            "key": r["setting_key"],
            "model_name": r["model_name"],
            "tuning": r["model_tuning"],
            "template": r["template_kind"],
            "decoding": r["decoding"],
            "max_length": r["max_length"],
            "precision": r["precision"],
            "backend": r["backend"],
            "benchmark": r["benchmark"],
            "variant": r["variant"],
            "length_semantics": r["length_semantics"],
            "limit": _none_if_nan(r["limit"]),
            "score_pct": r["exact"] * 100,
        }
        for r in records(grid)
        if r["exact"] is not None
    ]


def _effect_tables(
    rows: Sequence[dict[str, Any]], baseline: Mapping[str, Any]
) -> tuple[list[ReportTable], list[EffectPair]]:
    pairs = effect_pairs(rows, baseline)
    spread = precision_spread(rows)
    base = " ".join(f"{k}={v}" for k, v in baseline.items())
    no_pairs = (
        f"No model has a baseline setting ({base}) and a setting that changes one axis of it; "
        "choose another baseline with --baseline KEY=VALUE."
    )
    no_spread = "No model has two settings that differ only in precision."
    if not rows:
        no_pairs = no_spread = NO_SCORES
    tables = [
        ReportTable(
            "effects", _records(summarize_effects(pairs), EffectRow), empty_reason=no_pairs
        ),
        ReportTable("effect_pairs", _records(pairs, EffectPair), empty_reason=no_pairs),
        ReportTable(
            "precision_spread",
            _records(summarize_spread(spread), SpreadSummary),
            empty_reason=no_spread,
        ),
        ReportTable(
            "precision_spread_by_model", _records(spread, SpreadGroup), empty_reason=no_spread
        ),
    ]
    return tables, pairs


def _notes(
    settings: pd.DataFrame,
    grid: pd.DataFrame,
    matches: Sequence[LiteratureMatch],
    rows: Sequence[dict[str, Any]],
    n_pairs: int,
) -> list[str]:
    notes = _trust_notes(grid, matches)
    answered = {m.model_name for m in matches if m.own is not None}
    other_variant = {m.model_name: m.other_variant for m in matches if m.own is None}
    for model in sorted(set(grid["model_name"])) if len(grid) else []:
        if model in other_variant and other_variant[model]:
            notes.append(
                f"literature rows for model {model} report another variant than the store's "
                f"({other_variant[model]}): no answers, see the unmatched literature rows"
            )
        elif model not in answered:
            notes.append(f"no literature rows for model {model}")
    if len(settings):
        live = (SettingStatus.RUNNING.value, SettingStatus.QUEUED.value)
        n = int(settings["status"].isin(live).sum())
        if n:
            notes.append(f"{n} setting(s) are running or queued (interrupted?): not in the tables")
    if grid.empty:
        notes.append("the store holds no complete settings with a score")
    elif not n_pairs:
        notes.append("no effects: no model has a baseline setting and a one-axis change of it")
    shared = [c for c in cells(rows) if len(c.keys) > 1]
    if shared:
        models = ", ".join(sorted({c.model_name for c in shared}))
        notes.append(
            f"{len(shared)} cell(s) hold several settings of one model ({models}: same "
            "template, decoding, max length, precision and backend, e.g. other samples per "
            "problem or another imported file): effects and spreads count each cell once, at "
            "the mean of its settings (one vote per model)"
        )
    return notes


def _trust_notes(grid: pd.DataFrame, matches: Sequence[LiteratureMatch]) -> list[str]:
    """What a reader must know before quoting a number: settings whose samples the harness's
    prompt slicing cut (report/mismatch.py), pilots, inferred template kinds, and how many
    reported values each obtainability rule gives."""
    notes = mismatch_notes(grid)
    pilots = grid[grid["subset"] != ""] if len(grid) else grid
    if len(pilots):
        notes.append(
            f"{len(pilots)} setting(s) scored a subset of the problems (pilots: "
            f"{', '.join(sorted(set(pilots['subset'])))}); they are shown, never a reproduction"
        )
    derived = grid[grid["counts_from"] == COUNTS_DERIVED] if len(grid) else grid
    if len(derived):
        notes.append(
            f"{len(derived)} setting(s) predate stored score counts: their counts are derived "
            "from their executions"
        )
    inferred = grid[grid["template_kind_from"] != KIND_STORED] if len(grid) else grid
    for source, group in inferred.groupby("template_kind_from") if len(inferred) else []:
        notes.append(
            f"{len(group)} setting(s) predate stored template kinds: kind taken from the "
            f"{source} ({', '.join(sorted(set(group['model_name'])))})"
        )
    counts = obtainability_counts(matches)
    if counts["values"]:
        notes.append(
            f"{counts['values']} reported value(s): {counts['obtainable']} obtainable with the "
            f"stated or assumed sampling; {counts['not obtainable']} not obtainable with the "
            f"sampling their source states; {counts['not obtainable with one sample per problem']}"
            " not obtainable with one sample per problem (their source does not say how it "
            "sampled)"
        )
    return notes


def _axis_values(rows: Sequence[dict[str, Any]]) -> dict[str, set[Any]]:
    return {axis: {r[axis] for r in rows} for axis in AXES}


def _sources(parts: Sequence[Published]) -> dict[str, Any]:
    """What each benchmark was compared with (report.json's options)."""
    return {
        p.card.benchmark: {
            "title": p.card.title,
            "metric": p.card.metric,
            "match_rule": p.card.match_rule.value,
            "literature": p.literature or p.card.literature,
            "literature_rows": len(p.rows),
            "mapping": p.mapping.source or p.card.mapping,
            "variants": list(p.rule.variants or ()),
            "not_compared": p.problem,
        }
        for p in parts
    }


@dataclasses.dataclass(frozen=True)
class CheckedReport:
    """A report's inputs, read and checked (`check_report`): what is left cannot fail on a
    user's option."""

    store_uri: str
    options: ReportOptions
    store: Store
    settings: pd.DataFrame
    counts: Mapping[str, ProblemCounts]
    grid: pd.DataFrame
    rows: Sequence[dict[str, Any]]
    cards: Mapping[str, BenchmarkCard]
    card_notes: list[str]
    parts: Sequence[Published]


def build_report(store_uri: str, options: ReportOptions | None = None) -> ReportData:
    """Read the store and compute every table of the report (see docs/report.md). Raises
    BaselineError (a ValueError) for a baseline value no setting of the store has, and
    LiteratureError for a literature or mapping file the user named that cannot be used."""
    return finish_report(check_report(store_uri, options))


def check_report(store_uri: str, options: ReportOptions | None = None) -> CheckedReport:
    """The first part of `build_report`: read the grid and check the options against it (the
    baseline, the literature and mapping files); raises as `build_report` does."""
    options = options or ReportOptions()
    store = Store(store_uri)
    settings = options.without_damaged(read_frame(store, "settings"))  # --skip-damaged
    counts: dict[str, ProblemCounts] = {}
    grid = grid_frame(store, settings, options, counts)
    rows = _effect_rows(grid)
    check_baseline_in_store(options.baseline, _axis_values(rows))
    cards, card_notes = store_cards(settings, options)
    parts = published(grid, cards, options)
    return CheckedReport(
        store_uri, options, store, settings, counts, grid, rows, cards, card_notes, parts
    )


def finish_report(checked: CheckedReport) -> ReportData:
    """The rest of `build_report`: every table, from inputs `check_report` read and checked."""
    store_uri, options, store = checked.store_uri, checked.options, checked.store
    settings, counts, grid, rows = checked.settings, checked.counts, checked.grid, checked.rows
    cards, card_notes, parts = checked.cards, checked.card_notes, checked.parts
    literature, figure = _literature_tables(parts, grid, options.confidence)
    effects, pairs = _effect_tables(rows, options.baseline)
    (findings, comparisons), evidence_notes = evidence_tables(
        store, grid, rows, counts, literature[0].frame, options
    )
    runs = read_frame(store, "runs")
    tables = [
        literature[0],
        findings,
        pivot_table(grid, NO_SCORES),
        *literature[1:],
        *effects,
        comparisons,
        *_grid_tables(grid),
        skipped_table(settings),
        *provenance_tables(settings, runs, store.writer_active()),
    ]
    matches = all_matches(parts)
    notes = [*options.left_out(), *card_notes, *(p.problem for p in parts if p.problem)]
    return ReportData(
        store=store_uri,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        tables=tuple(tables),
        notes=tuple(notes + _notes(settings, grid, matches, rows, len(pairs)) + evidence_notes),
        literature_figure=tuple(figure),
        effect_pairs=tuple(pairs),
        options={
            "baseline": dict(options.baseline),
            "n_resamples": options.n_resamples,
            "confidence": options.confidence,
            "seed": options.seed,
            "benchmarks": _sources(parts),
        },
        cards=tuple(cards[name] for name in sorted(cards)),
        left_out=options.left_out(),
    )
