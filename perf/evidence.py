"""The report's statistics, timed side by side with scipy, and the planted-effect rates.

1. Speed: the findings of a grid of 11 models x 60 settings (the paper's grid) x 164 problems,
   one sample per problem, with 10,000 resamples: every declared comparison (axis effects,
   each model's 59 settings against its baseline, the exploratory ones), its bootstrap interval
   and p-value, the family adjustments (Holm, Westfall-Young max-T, Benjamini-Hochberg) and the
   sentences, as `reprogrid report` computes them (orchestrator.analysis.evidence: one joint
   resampling per scope, matrix products). Then the same intervals and p-values through
   scipy.stats, one comparison at a time: `bootstrap(..., method="percentile")` for every
   interval, `binomtest` for the exact McNemar p, `permutation_test(...,
   permutation_type="samples")` for the sign-flip p (the adjustments, negligible, are not
   repeated). Printed: both times and their ratio.
2. Rates: over N seeded planted grids (tests/planted.py: 4 models, template -8 problems, 4-bit
   -6, precision and 8-bit 0, sampling noise), how often the findings name each planted axis
   (against the power the test predicts) and any null axis (the family-wise rate), with the
   report's 10,000 resamples.

    python perf/evidence.py                      # both, scipy on every comparison
    python perf/evidence.py --scipy-limit 200    # scipy on the first 200 (time scaled up)
    python perf/evidence.py --rates 0            # speed only
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

# The planted grids are the tests' (tests/planted.py), which no installed package holds: the
# checkout's root goes first on the path, so `python perf/evidence.py` runs from the repository
# root without PYTHONPATH (Python puts the script's folder, perf/, there) and measures this
# checkout's code.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from scipy import stats

from orchestrator.analysis.baseline import DEFAULT_BASELINE
from orchestrator.analysis.evidence import EvidenceOptions, compare_grid, plan_grid
from orchestrator.analysis.findings import axis_findings, topic_of
from tests.planted import NULLS, PLANTED, planted_grid, predicted_power

PAPER = dict(decodings=("greedy", "t0.2", "t0.8"), lengths=(2048, 512))
METRIC = {"humanevalfix": "pass@1"}


def _mean(d, axis=-1):
    return np.mean(d, axis=axis)


def ours(grid, resamples: int) -> tuple[float, int, list[str]]:
    start = time.perf_counter()
    comparisons = compare_grid(
        grid.rows, grid.outcomes, DEFAULT_BASELINE, None, EvidenceOptions(resamples)
    )
    sentences = [f.sentence for f in axis_findings(comparisons, METRIC)]
    return time.perf_counter() - start, len(comparisons), sentences


def with_scipy(grid, resamples: int, limit: int | None) -> tuple[float, int, int]:
    """Seconds for the first `limit` comparisons through scipy, and how many there are."""
    sides = [
        s
        for planned in plan_grid(grid.rows, grid.outcomes, DEFAULT_BASELINE)
        for s in planned.sides
    ]
    chosen = sides if limit is None else sides[:limit]
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for a, b in chosen:
        d = b.astype(float) - a
        stats.bootstrap(
            (d,), _mean, method="percentile", n_resamples=resamples, rng=rng, vectorized=True
        )
        if a.dtype == bool and b.dtype == bool:
            only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
            if only_a + only_b:
                stats.binomtest(only_a, only_a + only_b)
        else:
            stats.permutation_test(
                (d,),
                _mean,
                permutation_type="samples",
                n_resamples=resamples,
                vectorized=True,
                rng=rng,
            )
    return time.perf_counter() - start, len(chosen), len(sides)


def speed(models: int, resamples: int, limit: int | None) -> None:
    grid = planted_grid(0, models, **PAPER)
    print(
        f"grid: {models} models x {len(grid.rows) // models} settings x 164 problems, "
        f"{resamples} resamples"
    )
    ours(planted_grid(1, 2, **PAPER), 100)  # warm-up (imports, BLAS threads)
    seconds, n, sentences = ours(grid, resamples)
    print(f"reprogrid: {n} comparisons, {len(sentences)} findings in {seconds:.2f} s")
    scipy_s, done, total = with_scipy(grid, resamples, limit)
    scaled = scipy_s * total / done
    note = "" if done == total else f" (measured on {done}, scaled to {total})"
    print(f"scipy.stats: {total} comparisons in {scaled:.1f} s{note}")
    print(f"ratio: scipy / reprogrid = {scaled / seconds:.0f}x")


def rates(n_grids: int, resamples: int) -> None:
    named: Counter = Counter()
    exact = 0
    start = time.perf_counter()
    for seed in range(n_grids):
        grid = planted_grid(seed)
        comparisons = compare_grid(
            grid.rows, grid.outcomes, DEFAULT_BASELINE, None, EvidenceOptions(resamples)
        )
        counted: dict[str, set[str]] = {}
        for f in axis_findings(comparisons, METRIC):
            if f.counts:
                counted.setdefault(f.group, set()).add(f.topic)
        for group, topics in counted.items():
            named.update((group, t) for t in topics)
        exact += counted.get("all", set()) == {topic_of(a, v) for a, v in PLANTED}
    print(
        f"planted effects: {n_grids} grids of 4 models (2 instruct) x 10 settings x 164 "
        f"problems, {resamples} resamples, {time.perf_counter() - start:.0f} s"
    )
    for group, models in (("all", 4), ("instruct", 2)):
        for (axis, value), k in PLANTED.items():
            topic = topic_of(axis, value)
            print(
                f"  {group:8s} {topic:8s} (-{k} problems): named in "
                f"{named[(group, topic)] / n_grids:.1%} (predicted power "
                f"{predicted_power(k, models, 5):.1%})"
            )
        nulls = sorted({topic_of(a, v) for a, v in NULLS})
        wrong = sum(named[(group, t)] for t in nulls)
        print(f"  {group:8s} null axes ({', '.join(nulls)}): named in {wrong / n_grids:.1%}")
    print(f"  exactly the planted axes (all models): {exact / n_grids:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=11)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--scipy-limit", type=int, default=None, metavar="N")
    parser.add_argument("--rates", type=int, default=200, metavar="GRIDS")
    args = parser.parse_args()
    speed(args.models, args.resamples, args.scipy_limit)
    if args.rates:
        rates(args.rates, args.resamples)


if __name__ == "__main__":
    main()
