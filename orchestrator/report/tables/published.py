"""Each benchmark's published values, joined with the grid by the rule its card names.

A store's cards come from its settings rows (`benchmark_card_json`, written at run time); a row
written before cards were stored gets the card of today's definition through
`ReportOptions.card_of` (the CLI passes the registry's), and the report says so. Per card: its
literature (the card's file, a `reprogrid:` file shipped in storage/data/ or a `data:` file under
the data folder, or the user's `--literature`), its name mapping (likewise, or `--mapping`), and
the join (orchestrator/analysis/literature.py) of the grid's settings of that benchmark. A
benchmark whose published values cannot be read from the card's own location (no data folder
configured, nothing published) is not compared, and a note says why; a file the user named
that cannot be read is an error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from orchestrator.analysis.literature import (
    JoinRule,
    LiteratureMatch,
    SettingScore,
    join_literature,
)
from orchestrator.report.tables.data import ReportOptions
from orchestrator.report.tables.grid import present, setting_label
from orchestrator.report.tables.records import records
from storage.literature import (
    LiteratureError,
    LiteratureMapping,
    LiteratureRow,
    LocationError,
    parse_literature_as,
    parse_literature_mapping,
    read_location,
)
from workers.card import BenchmarkCard, CardError, card_from_json


@dataclass(frozen=True)
class Published:
    """One benchmark's literature and its join with the store."""

    card: BenchmarkCard
    rule: JoinRule
    rows: tuple[LiteratureRow, ...] = ()
    mapping: LiteratureMapping = field(default_factory=lambda: LiteratureMapping({}))
    literature: str = ""  # where the rows came from
    matches: tuple[LiteratureMatch, ...] = ()
    scores: tuple[SettingScore, ...] = ()
    problem: str | None = None  # why nothing was compared


def store_cards(
    settings: pd.DataFrame, options: ReportOptions
) -> tuple[dict[str, BenchmarkCard], list[str]]:
    """The card of each benchmark with a complete setting (the newest stored one), and notes on
    cards taken from today's definitions or missing."""
    if not len(settings):
        return {}, []
    complete = settings[settings["status"] == "complete"].sort_values("updated_at")
    cards: dict[str, BenchmarkCard] = {}
    notes: list[str] = []
    for benchmark, part in complete.groupby("benchmark", sort=True):
        stored = part["benchmark_card_json"] if "benchmark_card_json" in part else pd.Series()
        texts = [t for t in stored if present(t)]
        try:
            found = [card_from_json(t) for t in texts]
        except CardError as e:
            raise CardError(f"settings of benchmark {benchmark!r}: {e}") from e
        missing = len(part) - len(texts)
        if found:
            cards[str(benchmark)] = found[-1]
            if len(set(found)) > 1:
                notes.append(
                    f"settings of {found[-1].title} carry {len(set(found))} different "
                    "benchmark cards (written by different versions): the newest is used"
                )
        if missing:
            known = cards.get(str(benchmark)) or options.card_of(str(benchmark))
            if known is None:
                notes.append(
                    f"{missing} setting(s) of benchmark {benchmark} carry no benchmark card "
                    "and none is known: not compared with any published values"
                )
                continue
            cards[str(benchmark)] = known
            if not found:
                notes.append(
                    f"{missing} setting(s) of {known.title} predate stored benchmark cards: "
                    "its card is taken from today's benchmark definition"
                )
    return cards, notes


def setting_scores(grid: pd.DataFrame, card: BenchmarkCard) -> list[SettingScore]:
    """The grid rows of the card's benchmark and headline metric, every variant (those of the
    reported variants answer a value, the others are its variant counterpart). A row's total is
    what the store recorded, else the card's problem count: a setting over fewer problems is a
    pilot, never given a verdict. `rank` is the row's position in the grid (ties)."""
    out = []
    for rank, row in enumerate(records(grid)):
        if row["benchmark"] != card.benchmark or row["metric"] != card.metric:
            continue
        if row["exact"] is None:
            continue
        total = row["benchmark_n_problems"]
        groups = row["n_groups"] if present(row["n_groups"]) else None
        out.append(
            SettingScore(
                key=row["setting_key"],
                model_name=row["model_name"],
                model_family=row["model_family"] or "",
                model_size_b=row["model_size_b"],
                tuning=row["model_tuning"],
                label=setting_label(row),
                score=row["exact"],
                n_problems=int(row["n_problems"] or card.n_problems),
                n_problems_total=int(total) if present(total) else card.n_problems,
                variant=str(row["variant"]),
                rank=rank,
                std_pct=row["std_pct"] if present(row["std_pct"]) else None,
                n_groups=int(groups) if groups is not None else 1,
                ci_low_pct=row["ci_low_pct"] if present(row["ci_low_pct"]) else None,
                ci_high_pct=row["ci_high_pct"] if present(row["ci_high_pct"]) else None,
            )
        )
    return out


Override = tuple[str | None, LiteratureMapping | None]


def _override_target(cards: Mapping[str, BenchmarkCard], options: ReportOptions) -> Override:
    """The benchmark `--literature` / `--mapping` replace: the mapping's `benchmark:`, else the
    store's only benchmark (None: no override). Raises LiteratureError."""
    if options.literature_path is None and options.mapping_path is None:
        return None, None
    mapping = None
    if options.mapping_path is not None:
        text, source = read_location(options.mapping_path, options.data_dir)
        mapping = parse_literature_mapping(text, source)
    target = mapping.benchmark if mapping is not None else None
    given = options.mapping_path or options.literature_path or ""
    if target is None:
        if len(cards) != 1:
            held = ", ".join(sorted(cards)) or "none"
            raise LiteratureError(
                given,
                None,
                "benchmark",
                None,
                f"the store holds scored settings of {held}: name the benchmark the file "
                "reports with a --mapping YAML whose `benchmark:` says it",
            )
        target = next(iter(cards))
    if target not in cards:
        held = ", ".join(sorted(cards)) or "none"
        raise LiteratureError(
            given, None, "benchmark", target, f"the store has no scored setting of it ({held})"
        )
    return target, mapping


def _load(
    card: BenchmarkCard,
    literature: str,
    mapping: LiteratureMapping | None,
    options: ReportOptions,
) -> tuple[tuple[LiteratureRow, ...], LiteratureMapping, str]:
    text, source = read_location(literature, options.data_dir)
    rows = parse_literature_as(
        text, source, card.literature_format.value, card.literature_source_id, card.literature_title
    )
    if mapping is None:
        mapping = parse_literature_mapping(*read_location(card.mapping, options.data_dir))
    if mapping.benchmark is not None and mapping.benchmark != card.benchmark:
        raise LiteratureError(
            mapping.source, None, "benchmark", mapping.benchmark, f"not {card.benchmark}"
        )
    return tuple(rows), mapping, source


def _literature(card: BenchmarkCard, options: ReportOptions, override: Override) -> Published:
    """One benchmark's published values and mapping, not yet joined (`problem`: why none)."""
    target, given_mapping = override
    mine = target == card.benchmark
    rule = JoinRule(
        n_problems=card.n_problems,
        variants=card.reported_variants,
        match=card.match_rule,
        group_size=card.k,
        confidence=options.confidence,
        benchmark=card.benchmark,
    )
    literature = options.literature_path if mine and options.literature_path else card.literature
    if not literature:
        return Published(card, rule, problem=f"nothing published is known for {card.title}")
    try:
        rows, mapping, source = _load(card, literature, given_mapping if mine else None, options)
    except LocationError as e:
        if mine and options.literature_path:
            raise
        return Published(card, rule, problem=f"{card.title} is not compared: {e}")
    # A mapping may narrow the card: other variants, another problem count.
    rule = dataclasses.replace(
        rule,
        n_problems=mapping.n_problems or rule.n_problems,
        variants=mapping.variants or rule.variants,
    )
    return Published(card, rule, rows, mapping, source)


def literature_of(cards: Mapping[str, BenchmarkCard], options: ReportOptions) -> list[Published]:
    """Each benchmark's published values and mapping (the card's, or the user's for the one
    benchmark `--literature` / `--mapping` name), in benchmark-name order, not joined."""
    override = _override_target(cards, options)
    return [_literature(cards[name], options, override) for name in sorted(cards)]


def published(
    grid: pd.DataFrame, cards: Mapping[str, BenchmarkCard], options: ReportOptions
) -> list[Published]:
    """Each benchmark's literature joined with the grid, in benchmark-name order."""
    out = []
    for part in literature_of(cards, options):
        if part.problem is None:
            scores = setting_scores(grid, part.card)
            matches = join_literature(part.rows, part.mapping.models, scores, part.rule)
            part = dataclasses.replace(part, matches=tuple(matches), scores=tuple(scores))
        out.append(part)
    return out


def all_matches(parts: Sequence[Published]) -> list[LiteratureMatch]:
    return [m for p in parts for m in p.matches]
