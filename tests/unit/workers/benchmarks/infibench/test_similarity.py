"""Dialogue similarity: ROUGE F, normalisation bounds and their defaults (spec §4.4)."""

from __future__ import annotations

import pytest

from tests.unit.workers.benchmarks.infibench.conftest import make_case
from workers.benchmarks.infibench.grade import grade_response
from workers.benchmarks.infibench.similarity import normalise, rouge_f, score_similarity


@pytest.mark.parametrize(
    ("raw", "lo", "hi", "expected"),
    [
        (0.2, 0.3, 0.51, 0.0),
        (0.3, 0.3, 0.51, 0.0),
        (0.405, 0.3, 0.51, 0.5),
        (0.6, 0.3, 0.51, 1.0),
        (0.3, 0.2, 0.4, 0.5),
    ],
)
def test_normalise(raw, lo, hi, expected):
    assert normalise(raw, lo, hi) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("metric", "extra", "lo", "hi"),
    [
        ("rougeLsum", {}, 0.3, 0.51),
        ("rougeL", {}, 0.3, 0.51),
        ("rouge2", {}, 0.3, 0.51),
        ("rouge1", {}, 0.3, 0.53),
        ("rouge1", {"min_score": 0.2, "max_score": 0.4}, 0.2, 0.4),
    ],
)
def test_bounds_defaults(metric, extra, lo, hi):
    case = make_case({"similarity": [{"metric": metric, "references": ["a b"], **extra}]})
    (parsed,) = case.criteria.similarity
    assert (parsed.min_score, parsed.max_score, parsed.weight) == (lo, hi, 1.0)


def test_rouge_values():
    assert rouge_f("The cat sat.", ("the CAT sat",)) == {
        "rouge1": 1.0,
        "rouge2": 1.0,
        "rougeL": 1.0,
        "rougeLsum": 1.0,
    }
    assert rouge_f("dogs bark", ("the cat sat",))["rouge1"] == 0.0
    # best reference wins (score_multi)
    assert rouge_f("the cat", ("dogs bark", "the cat"))["rouge1"] == 1.0
    # rougeLsum splits on newlines; rougeL does not
    values = rouge_f("b c\na", ("a\nb c",))
    assert values["rougeLsum"] == 1.0 and values["rougeL"] < 1.0


def test_weight_and_file_reference():
    case = make_case(
        {
            "similarity": [
                {"metric": "rouge1", "references": [{"path": "answer.txt"}], "weight": 2.0}
            ]
        },
        files={"answer.txt": "install the package with pip"},
    )
    (metric,) = case.criteria.similarity
    result = score_similarity(case.criteria.similarity, "install the package with pip")
    assert (result.earned, result.total) == (2.0, 2.0)
    assert metric.references == ("install the package with pip",)
    assert grade_response(case, "unrelated words only").score == 0.0


def test_missing_rouge_score_raises_instead_of_scoring_zero(monkeypatch):
    from workers.benchmarks.infibench import similarity

    def missing():
        raise similarity.RougeUnavailable("install rouge-score")

    monkeypatch.setattr(similarity, "_scorer", missing)
    case = make_case({"similarity": [{"metric": "rouge1", "references": ["a"]}]})
    with pytest.raises(similarity.RougeUnavailable):
        grade_response(case, "a")
