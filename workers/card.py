"""A benchmark's card: what a reader of its results needs to know, written with every setting.

The card is produced by the benchmark's definition (workers/benchmarks/<name>/definition.py),
stored as canonical JSON in each settings row (`benchmark_card_json`), and read back by the
report and the exports, which therefore never branch on a benchmark's name: the dataset a score
comes from, the headline metric and its scale, the published values it is compared with (the
literature file and the name mapping), and the rule by which a reported value is matched.

A location (`literature`, `mapping`) is `reprogrid:<file>` for a file shipped in
`storage/data/`, or `data:<path>` for a file under the data folder (`paths.data_dir`,
`REPROGRID_DATA_DIR`); storage/literature.py `read_location` resolves both.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any


class MatchRule(StrEnum):
    """How a reported value is compared with a measured setting."""

    # The value, printed with d decimals, is some k/(problems x samples) rounded or truncated
    # to d decimals; a setting reproduces it when its exact pass@1 gives it (the study's rule).
    EXACT_COUNT = "exact count"
    # A fractional score (graded answers): a setting reproduces the value when their gap is
    # within the spread of repeated runs (std over sample groups); near: inside its interval.
    SPREAD = "spread"


class LiteratureFormat(StrEnum):
    """The columns of a literature file (storage/literature.py parses both)."""

    PAPERS = "papers"  # one row per value a paper reports (model, score_pct, source_id, ...)
    LEADERBOARD = "leaderboard"  # a leaderboard: model, score_pct, std_pct, num_responses, ...


@dataclass(frozen=True)
class BenchmarkCard:
    benchmark: str  # the registry name
    title: str  # how reports name it, e.g. "HumanEvalFix-Python"
    dataset: str  # the dataset the problems come from, by its name
    dataset_id: str | None  # its Hugging Face dataset id (None: not on the Hub)
    dataset_split: str | None  # that dataset's split
    metric: str  # the headline metric, "<name>@<k>": "pass@1", "best@10"
    metric_description: str  # the headline in one sentence (how it is computed)
    graded: bool  # True: samples get fractional scores (best@k); False: pass/fail (pass@k)
    n_problems: int  # problems of the benchmark the literature reports (the score's scale)
    unit: str  # what a problem is called in sentences: "problem", "question"
    literature: str  # the published values: a location ("": none published)
    literature_format: LiteratureFormat
    literature_source_id: str  # who publishes a leaderboard ("" for papers: each row says)
    literature_title: str  # its title, for a leaderboard ("" for papers)
    mapping: str  # literature names -> configured model names: a location ("": none)
    reported_variants: tuple[str, ...]  # the variants the literature reports
    match_rule: MatchRule
    semantics: str  # whose scoring the numbers follow, e.g. "bigcode-evaluation-harness"

    @property
    def k(self) -> int:
        """The headline's k: samples per problem one score is over (best@10: groups of 10)."""
        return int(self.metric.rpartition("@")[2])

    @property
    def scale(self) -> str:
        """The headline's scale in words: "percent of 164 problems"."""
        return f"percent of {self.n_problems} {self.unit}s"

    def to_json(self) -> str:
        """Canonical JSON (sorted keys): the settings row's `benchmark_card_json`."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))


class CardError(ValueError):
    """A stored card that cannot be read (names the field and the bad value)."""


def card_from_json(text: str) -> BenchmarkCard:
    """A card back from its stored JSON; CardError for unknown or missing fields."""
    try:
        data: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError as e:
        raise CardError(f"benchmark card is not JSON ({e}): {text[:80]!r}") from e
    names = {f.name for f in fields(BenchmarkCard)}
    missing, unknown = sorted(names - set(data)), sorted(set(data) - names)
    if missing or unknown:
        raise CardError(
            f"benchmark card of {data.get('benchmark')!r}: missing {missing or 'nothing'}, "
            f"unknown {unknown or 'nothing'}; fields: {', '.join(sorted(names))}"
        )
    try:
        rule = MatchRule(data["match_rule"])
        form = LiteratureFormat(data["literature_format"])
    except ValueError as e:
        raise CardError(f"benchmark card of {data['benchmark']!r}: {e}") from e
    return BenchmarkCard(
        **{
            **data,
            "match_rule": rule,
            "literature_format": form,
            "reported_variants": tuple(data["reported_variants"]),
        }
    )
