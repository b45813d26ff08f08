from __future__ import annotations

from math import comb

import pytest

from orchestrator.analysis.metrics import estimate_pass_at_k, pass_at_k


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
