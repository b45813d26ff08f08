"""workers/scoring.py: pass@k, exact pass@1 counts, best@k, and the counts a scores row keeps."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import pytest

from workers.scoring import (
    ProblemCounts,
    estimate_pass_at_k,
    exact_pass1,
    group_best,
    group_spread,
    pass1_count,
    pass_at_1_of,
    pass_at_k,
    per_problem_pass1,
    problem_counts,
    setting_counts,
    stored_counts,
)


def brute(n: int, c: int, k: int) -> float:
    return 1.0 - comb(n - c, k) / comb(n, k)


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [
        (1, 0, 1),
        (1, 1, 1),
        (20, 0, 1),
        (20, 3, 1),
        (20, 3, 10),
        (20, 19, 10),
        (200, 7, 100),
        (10, 10, 10),
    ],
)
def test_unbiased_estimator_matches_the_binomial_formula(n, c, k):
    assert estimate_pass_at_k([n], [c], k)[0] == pytest.approx(brute(n, c, k), abs=1e-12)


def test_pass_at_k_only_where_every_problem_has_enough_samples():
    assert set(pass_at_k([20, 20], [1, 0])) == {1, 10}
    assert set(pass_at_k([1] * 164, [0] * 164)) == {1}
    assert set(pass_at_k([20, 5], [1, 0])) == {1}


def test_pass_at_1_with_one_sample_is_the_fraction_solved():
    assert pass_at_k([1] * 164, [1] * 74 + [0] * 90)[1] == pytest.approx(74 / 164)


def test_problem_counts_from_execution_rows():
    counts = problem_counts(["b", "a", "b", "a", "b"], [True, False, True, True, False])
    assert counts == ProblemCounts(("a", "b"), (2, 3), (1, 2))


@pytest.mark.parametrize(
    ("n", "c"),
    [
        ((1,) * 164, (1,) * 74 + (0,) * 90),  # greedy: k/164
        ((20, 20, 20), (0, 3, 20)),
        ((5, 20, 1), (5, 7, 0)),
        ((200,), (13,)),
    ],
)
def test_unbiased_pass1_is_the_binomial_estimator(n, c):
    counts = ProblemCounts(tuple(str(i) for i in range(len(n))), n, c)
    brute = [1 - comb(ni - ci, 1) / comb(ni, 1) for ni, ci in zip(n, c, strict=True)]
    assert per_problem_pass1(counts) == pytest.approx(brute)
    exact = exact_pass1(counts)
    assert exact == sum(Fraction(ci, ni) for ni, ci in zip(n, c, strict=True)) / len(n)
    assert float(exact) == pytest.approx(pass_at_k(n, c, ks=(1,))[1])


def test_greedy_pass1_is_exactly_k_over_164():
    counts = ProblemCounts(tuple(map(str, range(164))), (1,) * 164, (1,) * 74 + (0,) * 90)
    assert exact_pass1(counts) == Fraction(74, 164)


def test_the_stored_count_is_k_over_problems_times_samples():
    greedy = ProblemCounts(tuple(map(str, range(164))), (1,) * 164, (1,) * 74 + (0,) * 90)
    assert pass1_count(greedy) == (74, 164)
    sampled = ProblemCounts(("a", "b", "c"), (20, 20, 20), (0, 3, 20))
    assert pass1_count(sampled) == (23, 60)
    uneven = ProblemCounts(("a", "b"), (2, 3), (1, 2))  # 1/2 and 2/3: (3 + 4) / (2 x 6)
    assert pass1_count(uneven) == (7, 12)
    assert Fraction(*pass1_count(uneven)) == exact_pass1(uneven)
    with pytest.raises(ValueError):
        exact_pass1(ProblemCounts((), (), ()))


def test_pass_at_1_of_samples_by_key():
    passed = {("a", 0): True, ("a", 1): False, ("b", 0): False, ("b", 1): False}
    assert pass_at_1_of(passed) == 0.25
    assert pass_at_1_of({}) is None


@pytest.mark.parametrize(
    ("scores", "k", "expected"),
    [
        ([0.0] * 10, 10, [0.0]),
        ([0.1, 0.9, 0.3, 0, 0, 0, 0, 0, 0, 0], 10, [0.9]),
        ([1.0] + [0.0] * 19, 10, [1.0, 0.0]),
        ([-0.5] * 10, 10, [0.0]),  # the official running best starts at 0
        ([0.2, 0.4, 0.1], 2, [0.4, 0.1]),
    ],
)
def test_group_best(scores, k, expected):
    assert group_best(scores, k) == expected


def test_group_spread_is_the_mean_and_sample_std_of_the_group_totals():
    spread = group_spread([60.0, 62.0, 64.0], 100.0)
    assert (spread.mean, spread.std) == (62.0, 2.0)  # stdev with ddof=1
    assert (spread.fraction, spread.std_fraction) == (0.62, 0.02)
    assert group_spread([50.0], 100.0).std == 0.0  # one group: no spread measured


def test_setting_counts_are_the_scores_row_columns():
    counts = setting_counts(["b", "a", "b", "a"], [True, False, True, True])
    columns = counts.columns()
    assert columns == {
        "n_scored": 4,
        "n_passed": 3,
        "pass_at_1_numerator": 3,
        "pass_at_1_denominator": 4,
        "problem_ids": ["a", "b"],
        "problem_n_samples": [2, 2],
        "problem_n_passed": [1, 2],
        "problem_scores": [0.5, 1.0],
    }
    assert counts.pass_at == {1: 0.75}
    assert stored_counts(columns) == counts.counts
    assert stored_counts({"problem_ids": None}) is None  # a row written before schema 5
    assert stored_counts({"problem_ids": float("nan")}) is None  # the same, read into a frame
