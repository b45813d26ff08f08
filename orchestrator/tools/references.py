"""`check-references`: canonical fixes must pass every problem and buggy code none."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.run.api import load_benchmark, load_run_config
from workers.benchmarks.humanevalfix.adapter import HumanEvalFix, reference_samples
from workers.execspec import Outcome
from workers.spec import Variant


def check_references(
    overrides: Sequence[str], variant: str, workers: int | None = None
) -> dict[str, dict[str, int]]:
    config = load_run_config([*overrides, "benchmark=humanevalfix"])
    adapter = load_benchmark(config.benchmark, cache_dir=config.cache_dir)
    # The reference programs are HumanEvalFix's canonical and buggy solutions.
    assert isinstance(adapter, HumanEvalFix), "benchmark=humanevalfix is forced above"
    counts = {}
    for name, buggy in (("canonical", False), ("buggy", True)):
        samples = reference_samples(adapter.problem_set, Variant(variant), buggy=buggy)
        records = adapter.execute(samples, config.limits, workers=workers)
        counts[name] = {
            "passed": sum(r.outcome is Outcome.PASSED for r in records),
            "total": len(records),
        }
    return counts
