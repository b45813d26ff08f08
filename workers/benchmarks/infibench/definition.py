"""InfiBench's definition: suites, templates and loading (the registry entry)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workers.benchmarks.base import BenchmarkDataError, BenchmarkSource
from workers.benchmarks.infibench.adapter import METRIC, TEMPLATES, InfiBench
from workers.benchmarks.infibench.suite import (
    SuiteError,
    load_dev_suite,
    load_packed_suite,
    load_suite,
)
from workers.card import BenchmarkCard, LiteratureFormat, MatchRule
from workers.spec import ModelSpec, SettingSpec

SUITES = ("v2.1", "dev")  # v2.1: the 234-question suite; dev: the v2.0.0 dev suite (135)
DATA_FOLDER = "infibench"  # under the data folder (source=local)
OWN = "own"
# The model authors' own format for a free-form question is the tokenizer's chat template.
OWN_TEMPLATE = "chat"
N_QUESTIONS = 234  # suite v2.1 (the leaderboard's)
CARD = BenchmarkCard(
    benchmark="infibench",
    title="InfiBench v2.1",
    # infi-coder/infibench-evaluation-harness @ 736de982 (shared/specs/infibench.md)
    dataset="InfiBench suite v2.1",
    dataset_id=None,  # read from the data folder, not the Hub
    dataset_split=None,
    metric=METRIC,
    metric_description=f"{METRIC}: per question the best graded score of each group of 10 "
    "samples, mean over the groups and the questions (the official avg_max_10), with the "
    "sample std of the group totals",
    graded=True,
    n_problems=N_QUESTIONS,
    unit="question",
    literature=f"data:{DATA_FOLDER}/leaderboard.csv",  # the official leaderboard (main.csv)
    literature_format=LiteratureFormat.LEADERBOARD,
    literature_source_id="arXiv:2404.07940",
    literature_title="InfiBench leaderboard (infibench-evaluation-harness main.csv)",
    mapping="reprogrid:infibench-mapping.yaml",
    reported_variants=(SUITES[0],),
    match_rule=MatchRule.SPREAD,
    semantics="infibench-evaluation-harness",
)


@dataclass(frozen=True)
class InfiBenchDefinition:
    name: str = "infibench"
    variants: tuple[str, ...] = SUITES
    templates: tuple[str, ...] = (OWN, *TEMPLATES)
    card: BenchmarkCard = CARD

    def template_note(self, template: str) -> str | None:
        return None

    def resolve_template(self, template: str, model: ModelSpec) -> str:
        return OWN_TEMPLATE if template == OWN else template

    def template_kind(self, template: str, model: ModelSpec) -> str:
        return OWN if template == OWN_TEMPLATE else template

    def skip_reason(self, setting: SettingSpec) -> str | None:
        return None

    def load(self, source: BenchmarkSource) -> InfiBench:
        """`local`: <data_dir>/infibench (variant v2.1, or dev); otherwise a suite folder (with
        suite_v2.1.yaml) or a packed CSV path."""
        try:
            if source.source == "local":
                if not source.data_dir:
                    raise BenchmarkDataError("no data folder configured (paths.data_dir)")
                folder = Path(source.data_dir) / DATA_FOLDER
                if source.variant not in SUITES:
                    raise BenchmarkDataError(
                        f"Unknown InfiBench suite {source.variant!r}. Valid: {', '.join(SUITES)}"
                    )
                suite = load_dev_suite(folder) if source.variant == "dev" else load_suite(folder)
            elif source.source == "hub":
                raise BenchmarkDataError(
                    "InfiBench from the Hub is not supported offline; download the packed CSV "
                    "(llylly001/InfiBench) and pass benchmark.source=<path to the CSV>"
                )
            elif source.source.endswith(".csv"):
                suite = load_packed_suite(source.source)
            else:
                suite = load_suite(source.source)
        except SuiteError as e:
            raise BenchmarkDataError(str(e)) from e
        return InfiBench(suite)


INFIBENCH = InfiBenchDefinition()
