"""Multiple comparisons: the declared families and their adjusted p-values. Pure.

A grid makes dozens of comparisons; a p-value below 0.05 among them means little unless the
family it belongs to is declared before testing and its p-values are adjusted together
(docs/statistics.md):

* **axis effects** (one family per group of models, all and instruct): Holm's step-down
  (Holm 1979), which controls the family-wise error rate under any dependence;
* **a model's settings against its baseline** (one family per model and baseline): Westfall and
  Young's step-down max-T (1993) over one joint sign-flip resampling of the problems: the same
  signs for every setting of the model, so the correlation between its settings is used, not
  paid for as Holm pays for it;
* **exploratory** comparisons (everything else): Benjamini-Hochberg (1995) at q = 0.05, which
  controls the false discovery rate, labelled exploratory.

Holm and Benjamini-Hochberg equal `statsmodels.stats.multitest.multipletests(p, method="holm")`
and `(..., method="fdr_bh")`; the tests check it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np


class Adjustment(enum.Enum):
    HOLM = "Holm"
    WESTFALL_YOUNG = "Westfall-Young max-T"
    BENJAMINI_HOCHBERG = "Benjamini-Hochberg"


class FamilyKind(enum.Enum):
    AXIS_EFFECTS = "axis effects"  # confirmatory: Holm
    MODEL_SETTINGS = "settings vs baseline"  # confirmatory: Westfall-Young max-T
    EXPLORATORY = "exploratory"  # Benjamini-Hochberg, q = 0.05

    @property
    def adjustment(self) -> Adjustment:
        return {
            FamilyKind.AXIS_EFFECTS: Adjustment.HOLM,
            FamilyKind.MODEL_SETTINGS: Adjustment.WESTFALL_YOUNG,
            FamilyKind.EXPLORATORY: Adjustment.BENJAMINI_HOCHBERG,
        }[self]


def _p_array(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p-values must be a vector, got shape {p.shape}")
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    return p


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values: the i-th smallest is max over j <= i of
    min(1, (m - j + 1) p_(j)), in the input's order."""
    p = _p_array(p_values)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


def benjamini_hochberg(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values): the i-th smallest is min over j >= i of
    min(1, m p_(j) / j), in the input's order. Reject where the adjusted p <= q."""
    p = _p_array(p_values)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, m * p[order] / np.arange(1, m + 1))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum.accumulate(scaled[::-1])[::-1]
    return adjusted


def standardized_sums(differences: np.ndarray, signs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The max-T statistics of M comparisons over n problems: |sum_i d_i| / sqrt(sum_i d_i^2)
    per comparison (observed, shape (M,)) and under each of the R sign flips ((R, M)).

    Sign flips leave sum_i d_i^2 unchanged, so this studentization puts every comparison on
    the same scale (variance 1 under the null) whatever its discordance."""
    d = np.asarray(differences, dtype=float)
    scale = np.sqrt(np.sum(d**2, axis=1))
    scale[scale == 0] = 1.0  # no difference at all: the statistic is 0 in every resample
    observed = np.abs(d.sum(axis=1)) / scale
    null = np.abs(np.asarray(signs, dtype=float) @ d.T) / scale
    return observed, null


def westfall_young(observed: np.ndarray, null: np.ndarray) -> np.ndarray:
    """Westfall-Young step-down max-T adjusted p-values (Westfall and Young 1993, Algorithm 4.1).

    `observed`: |T_j| of the M comparisons; `null`: (R, M) the same statistics under R joint
    resamplings of the null. With the comparisons ordered by decreasing |T|, the adjusted p of
    the k-th is (1 + #{r: max over l >= k of null[r, (l)] >= |T_(k)|}) / (R + 1), made
    monotone (never below the one before it)."""
    t = np.asarray(observed, dtype=float)
    z = np.asarray(null, dtype=float)
    if z.ndim != 2 or z.shape[1] != t.size:
        raise ValueError(f"null must be (resamples, {t.size}), got {z.shape}")
    m, r = t.size, z.shape[0]
    if m == 0:
        return t
    order = np.argsort(-t, kind="stable")
    # successive maxima from the least significant up: u[:, k] = max over l >= k
    u = np.maximum.accumulate(z[:, order][:, ::-1], axis=1)[:, ::-1]
    tol = 100 * np.finfo(float).eps * np.abs(t[order])
    counts = np.sum(u >= t[order] - tol, axis=0)
    stepped = np.maximum.accumulate((counts + 1) / (r + 1))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, stepped)
    return adjusted


def adjust(kind: FamilyKind, p_values: Sequence[float], null: tuple | None = None) -> np.ndarray:
    """The family's adjusted p-values by its declared method. Westfall-Young needs
    `null` = (observed, resampled) from `standardized_sums`; an adjusted p is never below its
    raw p (a resampled null can fall a little under an exact McNemar p by chance)."""
    p = _p_array(p_values)
    if kind.adjustment is Adjustment.HOLM:
        return holm(p)
    if kind.adjustment is Adjustment.BENJAMINI_HOCHBERG:
        return benjamini_hochberg(p)
    if null is None:
        raise ValueError("Westfall-Young needs the joint null statistics (standardized_sums)")
    return np.maximum(westfall_young(*null), p)
