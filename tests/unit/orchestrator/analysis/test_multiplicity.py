"""Adjusted p-values: Holm and Benjamini-Hochberg against statsmodels, Westfall-Young against a
plain loop over its definition."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from orchestrator.analysis.multiplicity import (
    Adjustment,
    FamilyKind,
    adjust,
    benjamini_hochberg,
    holm,
    standardized_sums,
    westfall_young,
)
from orchestrator.analysis.paired import draw_resamples


def random_p(rng: np.random.Generator) -> np.ndarray:
    m = int(rng.integers(1, 60))
    p = rng.random(m) ** rng.uniform(0.3, 5)
    if m > 3 and rng.random() < 0.3:
        p[rng.integers(0, m, 3)] = p[0]  # ties
    if rng.random() < 0.1:
        p[0] = 1.0
    return p


def test_holm_and_bh_equal_statsmodels_on_1000_families(monkeypatch):
    # multipletests calls gc.collect() on every call (a tenth of a second in a test process)
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    rng = np.random.default_rng(4)
    for _ in range(1000):
        p = random_p(rng)
        np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1], atol=1e-9, rtol=0)
        np.testing.assert_allclose(
            benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1], atol=1e-9, rtol=0
        )


def westfall_young_by_loops(observed: np.ndarray, null: np.ndarray) -> np.ndarray:
    """Algorithm 4.1 of Westfall and Young (1993), written as the book does."""
    m, r = observed.size, null.shape[0]
    order = sorted(range(m), key=lambda j: -observed[j])
    adjusted = np.empty(m)
    previous = 0.0
    for k, j in enumerate(order):
        rest = order[k:]
        hits = sum(1 for i in range(r) if max(null[i, q] for q in rest) >= observed[j])
        previous = max(previous, (hits + 1) / (r + 1))
        adjusted[j] = min(1.0, previous)
    return adjusted


def test_westfall_young_follows_its_definition():
    rng = np.random.default_rng(5)
    for _ in range(30):
        m, n = int(rng.integers(1, 8)), int(rng.integers(5, 40))
        d = rng.choice([-1.0, 0.0, 1.0], size=(m, n), p=[0.1, 0.75, 0.15])
        d[0] *= rng.random() < 0.8  # sometimes a comparison without any difference
        signs = draw_resamples(n, 300, seed=int(rng.integers(1000))).signs
        observed, null = standardized_sums(d, signs)
        np.testing.assert_allclose(
            westfall_young(observed, null), westfall_young_by_loops(observed, null), atol=1e-12
        )


def test_westfall_young_is_uniformly_more_powerful_than_bonferroni_on_correlated_settings():
    rng = np.random.default_rng(6)
    n = 164
    shared = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.1, 0.7, 0.2])  # one effect, 20 copies
    d = np.array([np.where(rng.random(n) < 0.9, shared, 0.0) for _ in range(20)])
    resamples = draw_resamples(n, 2000, seed=1)
    observed, null = standardized_sums(d, resamples.signs)
    wy = westfall_young(observed, null)
    raw = (1 + (null >= observed[None, :] - 1e-12).sum(axis=0)) / (1 + null.shape[0])
    assert np.all(wy >= raw - 1e-12)  # never below the raw resampled p
    assert np.all(wy <= np.minimum(1, raw * 20) + 1e-12)  # never above Bonferroni's
    assert np.median(wy / np.minimum(1, raw * 20)) < 0.5  # and well below it here


def test_families_declare_their_methods_and_wy_never_goes_below_the_raw_p():
    assert FamilyKind.AXIS_EFFECTS.adjustment is Adjustment.HOLM
    assert FamilyKind.MODEL_SETTINGS.adjustment is Adjustment.WESTFALL_YOUNG
    assert FamilyKind.EXPLORATORY.adjustment is Adjustment.BENJAMINI_HOCHBERG
    p = [0.01, 0.04, 0.5]
    np.testing.assert_allclose(adjust(FamilyKind.AXIS_EFFECTS, p), [0.03, 0.08, 0.5])
    observed, null = np.array([5.0, 0.1, 0.2]), np.zeros((9, 3))
    adjusted = adjust(FamilyKind.MODEL_SETTINGS, [0.3, 0.2, 0.2], (observed, null))
    assert adjusted[0] == pytest.approx(0.3)  # the resampled 0.1 is below the exact raw 0.3
    with pytest.raises(ValueError, match="needs the joint null"):
        adjust(FamilyKind.MODEL_SETTINGS, p)
    with pytest.raises(ValueError, match=r"lie in \[0, 1\]"):
        holm([0.5, 1.2])
