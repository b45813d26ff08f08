from __future__ import annotations

import numpy as np
import pytest

from orchestrator.analysis import intervals
from orchestrator.analysis.intervals import DEFAULT_RESAMPLES, bootstrap_interval, pass1_interval
from workers.scoring import ProblemCounts


def _reference(values, n_resamples, confidence, seed):
    """Straightforward percentile bootstrap with the same draws (n_resamples <= one chunk), over
    the values in ascending order as documented."""
    data = np.sort(np.asarray(values, dtype=float))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(n_resamples, data.size))
    means = data[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    return np.quantile(means, [alpha, 1 - alpha])


def test_bootstrap_matches_the_reference_and_is_seeded():
    values = np.r_[np.ones(30), np.zeros(134)]
    interval = bootstrap_interval(values, n_resamples=1500, confidence=0.9, seed=7)
    low, high = _reference(values, 1500, 0.9, 7)
    assert (interval.low, interval.high) == pytest.approx((low, high))
    assert interval.estimate == pytest.approx(30 / 164)
    assert interval == bootstrap_interval(values, n_resamples=1500, confidence=0.9, seed=7)
    assert interval != bootstrap_interval(values, n_resamples=1500, confidence=0.9, seed=8)


def test_the_interval_depends_on_the_scores_not_their_order():
    values = np.r_[np.ones(30), np.zeros(134), np.full(20, 0.5)]
    shuffled = np.random.default_rng(3).permutation(values)
    assert bootstrap_interval(shuffled, n_resamples=1500) == bootstrap_interval(values, 1500)
    # a cached interval is that of the same arguments: another seed or level draws anew
    scores = np.random.default_rng(4).random(40)  # continuous: quantiles move with the draws
    first = bootstrap_interval(scores, 1500)
    assert bootstrap_interval(scores[::-1], 1500) == first
    assert bootstrap_interval(scores, 1500, seed=1) != first
    assert bootstrap_interval(scores, 1500, confidence=0.9) != first


def test_interval_brackets_the_estimate_and_has_a_sensible_width():
    values = np.r_[np.ones(74), np.zeros(90)]
    interval = bootstrap_interval(values)
    assert interval.n_resamples == DEFAULT_RESAMPLES
    assert interval.low < 74 / 164 < interval.high
    se = np.sqrt(74 / 164 * 90 / 164 / 164)  # binomial standard error
    assert interval.high - interval.low == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_degenerate_and_invalid_inputs():
    zero = bootstrap_interval([0.0] * 10, n_resamples=100)
    assert (zero.low, zero.estimate, zero.high) == (0.0, 0.0, 0.0)
    one = bootstrap_interval([0.25], n_resamples=100)
    assert (one.low, one.high) == (0.25, 0.25)
    with pytest.raises(ValueError):
        bootstrap_interval([], n_resamples=10)
    with pytest.raises(ValueError):
        bootstrap_interval([1.0], n_resamples=0)
    with pytest.raises(ValueError):
        bootstrap_interval([1.0], confidence=1.0)


def test_sampled_interval_resamples_problems_not_samples():
    # Every problem has pass@1 0.5 (10 of 20): resampling problems cannot move the mean.
    counts = ProblemCounts(tuple(map(str, range(50))), (20,) * 50, (10,) * 50)
    interval = pass1_interval(counts, n_resamples=500)
    assert (interval.low, interval.estimate, interval.high) == pytest.approx((0.5, 0.5, 0.5))


def test_more_resamples_than_one_chunk():
    values = np.r_[np.ones(10), np.zeros(40)]
    interval = bootstrap_interval(values, n_resamples=4500, seed=1)
    assert interval.n_resamples == 4500 and interval.low < 0.2 < interval.high


@pytest.mark.parametrize(("n", "n_resamples", "seed"), [(164, 10_000, 0), (7, 2_500, 3)])
def test_a_pass_fail_interval_is_the_one_drawn_value_by_value(n, n_resamples, seed):
    """Pass/fail scores take their resampled means from the shared draws' counts: the same
    floats, exactly, as drawing indices into the scores (in chunks, as for any scores)."""
    for passed in sorted({0, 1, n // 3, n - 1, n}):
        values = tuple([0.0] * (n - passed) + [1.0] * passed)
        drawn = intervals._drawn_means(values, n_resamples, seed)
        assert np.array_equal(intervals._pass_fail_means(n, n_resamples, seed, passed), drawn)
        interval = bootstrap_interval(values, n_resamples, 0.95, seed)
        want = np.quantile(drawn, [0.025, 0.975])
        assert (interval.low, interval.high) == (want[0], want[1])
