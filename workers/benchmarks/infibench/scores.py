"""Per-response results and their plain rows (JSON-native values, one row per response)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ResponseStatus(StrEnum):
    SCORED = "scored"
    # A unit-test executor of this case is not installed: the response has no score (it is
    # not silently 0); the aggregate lists these cases and languages.
    TOOLCHAIN_MISSING = "toolchain_missing"
    # Grading raised (bad regex, unsupported language, failing hook, ...). The official grader
    # then scores the whole case 0 for the model; so does `aggregate`.
    ERROR = "error"


@dataclass(frozen=True)
class MetricScore:
    metric: str  # keywords | blank_filling | unit_test | similarity | customized
    earned: float  # points earned (after the metric's post_handler, before max/min_score)
    total: float  # points possible
    detail: Any  # JSON-native: statuses, blank strings, ROUGE values, test results, hook detail
    counts_as: str  # the metric breakdown it belongs to (customized -> its real_metric_type)


@dataclass(frozen=True)
class ResponseScore:
    case_path: str
    case_id: str
    sample_index: int
    status: ResponseStatus
    score: float | None  # earned / total * full_score, clipped by max/min_score; None if unscored
    metrics: tuple[MetricScore, ...] = ()
    error: str | None = None  # status=error: the exception; toolchain_missing: what is missing
    missing_executors: tuple[str, ...] = ()  # status=toolchain_missing: executor languages

    @property
    def raw_earned(self) -> float:
        """Sum of the metrics' earned points (what print_result_stat ranks responses by)."""
        return sum(m.earned for m in self.metrics)


def to_row(score: ResponseScore) -> dict[str, Any]:
    """One response as a flat dict of JSON-native values (for the Parquet store)."""
    return {
        "case_path": score.case_path,
        "case_id": score.case_id,
        "sample_index": score.sample_index,
        "status": str(score.status),
        "score": score.score,
        "error": score.error,
        "missing_executors": list(score.missing_executors),
        "metrics": json.dumps(
            [
                {
                    "metric": m.metric,
                    "counts_as": m.counts_as,
                    "earned": m.earned,
                    "total": m.total,
                    "detail": m.detail,
                }
                for m in score.metrics
            ],
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        ),
    }


def to_rows(scores: Iterable[ResponseScore]) -> list[dict[str, Any]]:
    return [to_row(s) for s in scores]
