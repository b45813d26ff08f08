"""The report's data types: its options, its tables and what the figures are drawn from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from orchestrator.analysis.baseline import DEFAULT_BASELINE
from orchestrator.analysis.effects import EffectPair
from orchestrator.analysis.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
from orchestrator.report.tables.damaged import left_out, without_damaged
from storage.damage import StoreDamage
from workers.card import BenchmarkCard

# A model's own template by model name, for settings rows that do not record their template
# kind (None: unknown). The report wing never reads config; the CLI passes this in.
OwnTemplateLookup = Callable[[str], str | None]
# A benchmark's card by its name, for settings rows written before cards were stored (None:
# unknown). The report wing never imports benchmark code; the CLI passes the registry's in.
CardLookup = Callable[[str], BenchmarkCard | None]


def _unknown_own_template(model_name: str) -> str | None:
    return None


def _unknown_card(benchmark: str) -> BenchmarkCard | None:
    return None


@dataclass(frozen=True)
class ReportOptions:
    # One benchmark's published values and name mapping instead of its card's (None: the
    # card's); which benchmark: the mapping's `benchmark:`, else the store's only one.
    literature_path: str | None = None
    mapping_path: str | None = None
    data_dir: str | None = None  # the data folder a card's `data:` locations are under
    own_template_of: OwnTemplateLookup = _unknown_own_template
    card_of: CardLookup = _unknown_card
    baseline: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_BASELINE))
    n_resamples: int = DEFAULT_RESAMPLES  # bootstrap resamples per setting
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED  # bootstrap seed (the same for every setting)
    # Damaged files of the store found before reading (`--skip-damaged`): the settings they
    # hold are left out and named first among the notes (None: none were looked for).
    damage: StoreDamage | None = None

    def left_out(self) -> tuple[str, ...]:
        """What the report leaves out for `damage`, a line per setting (none without damage)."""
        return left_out(self.damage)

    def without_damaged(self, settings: pd.DataFrame) -> pd.DataFrame:
        """The settings rows but those of settings a damaged file holds rows of."""
        return without_damaged(settings, self.damage)


@dataclass(frozen=True)
class ReportTable:
    name: str  # file stem (<name>.csv), JSON key; titles live in formats/catalogue.py (TABLES)
    frame: pd.DataFrame
    group_by: str | None = None  # md/html/tex: one sub-table per value of this column
    empty_reason: str = ""  # shown instead of an empty table: why it has no rows
    # html: hover text per cell (same index and columns as `frame`; None or "" for none)
    hover: pd.DataFrame | None = None
    # tex: the interval shown after a cell's value ("[10.37, 21.97]", "mean of 2 settings"),
    # for tables whose cells are scores (the pivot); same index and columns as `frame`
    intervals: pd.DataFrame | None = None


@dataclass(frozen=True)
class ReportedValue:
    """A literature value as Figure 1 marks it."""

    value_text: str  # as printed, e.g. "16.4"
    source_id: str
    status: str  # a Verdict value: the marker's colour and shape

    @property
    def value(self) -> float:
        return float(self.value_text)


@dataclass(frozen=True)
class ModelLiterature:
    """Figure 1 inputs for one model: its measured scores and the values papers report."""

    model_name: str  # the label (with the benchmark's title in a store of several)
    scores_pct: tuple[float, ...]
    reported: tuple[ReportedValue, ...]


@dataclass(frozen=True)
class ReportData:
    store: str
    generated_at: str
    tables: tuple[ReportTable, ...]
    notes: tuple[str, ...]
    literature_figure: tuple[ModelLiterature, ...]  # Figure 1 inputs
    effect_pairs: tuple[EffectPair, ...]  # Figure 2 inputs
    options: dict[str, Any]
    cards: tuple[BenchmarkCard, ...] = ()  # the store's benchmarks: what the sentences say
    # The settings left out for damaged files (`ReportOptions.left_out`): the first screen's
    # first lines, the first notes, and report.json's `left_out`
    left_out: tuple[str, ...] = ()

    @cached_property
    def scored_problems(self) -> dict[str, list[int]]:
        """Per benchmark, the numbers of problems the grid's scored settings hold (none without
        a grid table). Every table's description says the scale in them, in every format: read
        from the grid once per report, not once per description."""
        grid = next((t.frame for t in self.tables if t.name == "grid"), None)
        if grid is None or grid.empty:
            return {}
        scored = grid[grid["score_pct"].notna() & grid["n_problems"].notna()]
        out: dict[str, list[int]] = {}
        for benchmark, n in zip(scored["benchmark"], scored["n_problems"], strict=True):
            out.setdefault(str(benchmark), []).append(int(n))
        return out

    def table(self, name: str) -> pd.DataFrame:
        for t in self.tables:
            if t.name == name:
                return t.frame
        raise KeyError(f"no table {name!r}; tables: {', '.join(t.name for t in self.tables)}")
