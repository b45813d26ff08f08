"""The paired comparison of two settings on the same problems. Pure.

Sign convention: **A is the reference, B the changed setting**, and every difference is
**B minus A**: `delta_pp` = 100 x (mean score of B - mean score of A), positive when B scores
higher. `b` counts the problems where A does better (only A passes, for one sample), `c` those
where B does better (only B passes), so with one sample per problem `delta_pp` = 100 (c - b) / n.

Which test (see docs/statistics.md):

* **One sample per problem on both sides** (greedy, or pass@1 from n = 1; outcomes given as
  `bool`): the exact McNemar test, the two-sided binomial test of b against b + c with p = 1/2
  (`scipy.stats.binomtest(b, b + c)`, `statsmodels...mcnemar(exact=True)`).
* **Otherwise** (several samples per problem: the per-problem pass rate c/n; InfiBench's
  best@10; any score in [0, 1] per problem, given as floats): a two-sided sign-flip permutation
  test of the mean per-problem difference d_i (each problem's difference keeps or flips its
  sign: `scipy.stats.permutation_test(..., permutation_type="samples")`), exhaustive when the
  problems with a nonzero difference allow at most `n_resamples` sign patterns, else random with
  the +1 correction (scipy's definition: twice the smaller one-sided p, at most 1).
* **Both**: a percentile bootstrap interval for the mean difference, resampling problems with
  replacement (the problem is the unit: a problem's samples are already folded into its score).

Many comparisons on the same problems share one `Resamples`: the same bootstrap draws and the
same sign flips for every comparison (what a joint bootstrap needs, e.g. Westfall-Young in
`orchestrator.analysis.multiplicity`), drawn from `numpy.random.default_rng(seed)`, so a report
is reproducible and `compare_paired(a, b)` equals the same comparison inside a report with the
same seed.

`mdd_pp`, the minimum detectable difference at 80% power and two-sided alpha = 0.05, is the normal
approximation (z_{1-alpha/2} + z_{power}) x sqrt(mean(d^2) / n): mean(d^2) is the discordant
fraction f for one sample per problem (the variance of d under "no difference"), so this is the
2.8 x sqrt(f / n) of docs/statistics.md. With no discordant problem at all, f is taken as one
problem in n: the smallest discordance a difference could have, so the figure stays a difference
the test could see rather than 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from orchestrator.analysis.pairedbatch import compare_pairs
from orchestrator.analysis.pairedstats import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIDENCE,
    DEFAULT_POWER,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PairedMethod,
    PairedResult,
    PairingError,
    Resamples,
    align_problems,
    draw_resamples,
    mcnemar_exact_p,
    minimum_detectable_pp,
    outcome_vector,
)

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_POWER",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "PairedMethod",
    "PairedResult",
    "PairingError",
    "Resamples",
    "align_problems",
    "compare_paired",
    "compare_rows",
    "draw_resamples",
    "mcnemar_exact_p",
    "minimum_detectable_pp",
]


def compare_paired(
    a: np.ndarray | Sequence[bool] | Sequence[float],
    b: np.ndarray | Sequence[bool] | Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> PairedResult:
    """Compare B with A on aligned per-problem outcomes (same order, same problems).

    `bool` outcomes on both sides (one sample per problem) get the exact McNemar test; scores in
    [0, 1] (several samples, best@10; a bool side is then read as 0/1) the sign-flip test. Both
    get a percentile bootstrap interval over problems."""
    xa, xb = outcome_vector(a), outcome_vector(b)
    if xa.shape != xb.shape:
        raise PairingError(f"A holds {xa.size} problems, B {xb.size}: align them first")
    return compare_rows([xa], [xb], draw_resamples(xa.size, n_resamples, seed), confidence)[0]


def compare_rows(
    a_rows: Sequence[np.ndarray],
    b_rows: Sequence[np.ndarray],
    resamples: Resamples,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[PairedResult]:
    """`compare_paired` of each (a_rows[i], b_rows[i]), all with the same draws (vectorised)."""
    if len(a_rows) != len(b_rows):
        raise PairingError(f"{len(a_rows)} A rows but {len(b_rows)} B rows")
    m = len(a_rows)
    return compare_pairs([*a_rows, *b_rows], [(i, m + i) for i in range(m)], resamples, confidence)
