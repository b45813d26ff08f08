"""Dialogue similarity (spec §4.4): ROUGE F-measure, normalised and clipped.

The official grader calls HF `evaluate`'s "rouge" metric, i.e. Google's `rouge_score`
(0.1.2 reproduces the official numbers) with rouge1/rouge2/rougeL/rougeLsum, no stemmer, the
default tokenizer, `score_multi` over the references (best F), and a bootstrap aggregator that,
over a single prediction, returns the value itself. We call `rouge_score` directly, which gives
the same floats without `evaluate`. The raw response is used as is (no code-block removal).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from workers.benchmarks.infibench.criteria import ROUGE_METRICS, SimilarityMetric


@dataclass(frozen=True)
class SimilarityOutcome:
    earned: float
    total: float
    details: tuple[dict[str, float], ...]  # per metric: the 4 ROUGE F values + normalized_score


class RougeUnavailable(RuntimeError):
    """`rouge_score` is not installed: similarity questions cannot be scored on this machine."""


@lru_cache(maxsize=1)
def _scorer():
    try:
        from rouge_score import rouge_scorer  # imported lazily: only similarity cases need it
    except ImportError as e:
        raise RougeUnavailable("install rouge-score==0.1.2 to score similarity questions") from e

    return rouge_scorer.RougeScorer(list(ROUGE_METRICS), use_stemmer=False)


def rouge_f(response: str, references: tuple[str, ...]) -> dict[str, float]:
    """F-measure of each ROUGE type, best over the references."""
    scores = _scorer().score_multi(list(references), response)
    return {name: float(scores[name].fmeasure) for name in ROUGE_METRICS}


def normalise(raw: float, min_score: float, max_score: float) -> float:
    """clip((raw - min) / (max - min), 0, 1)."""
    return max(min((raw - min_score) / (max_score - min_score), 1.0), 0.0)


def score_similarity(metrics: tuple[SimilarityMetric, ...], response: str) -> SimilarityOutcome:
    earned = total = 0.0
    details = []
    for metric in metrics:
        values = rouge_f(response, metric.references)
        normalized = normalise(values[metric.metric], metric.min_score, metric.max_score)
        total += metric.weight
        earned += normalized * metric.weight
        details.append({**values, "normalized_score": normalized})
    return SimilarityOutcome(earned=earned, total=total, details=tuple(details))
