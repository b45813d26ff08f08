"""The benchmark registry: name -> definition, resolved lazily so that naming a benchmark never
imports another one's dependencies. Adding a benchmark is one line here."""

from __future__ import annotations

import difflib
import importlib

from workers.benchmarks.base import BenchmarkDefinition

BENCHMARKS: dict[str, str] = {
    "humanevalfix": "workers.benchmarks.humanevalfix.definition:HUMANEVALFIX",
    "infibench": "workers.benchmarks.infibench.definition:INFIBENCH",
}


class UnknownBenchmark(ValueError):
    """A benchmark name the registry does not know."""


def get_benchmark(name: str) -> BenchmarkDefinition:
    """The definition registered under `name`; UnknownBenchmark (with a suggestion) if none."""
    target = BENCHMARKS.get(name)
    if target is None:
        close = difflib.get_close_matches(name, list(BENCHMARKS), n=1)
        hint = f" Did you mean: {close[0]}?" if close else ""
        raise UnknownBenchmark(f"Unknown benchmark {name!r}.{hint} Valid: {', '.join(BENCHMARKS)}")
    module_name, attribute = target.split(":")
    definition = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(definition, BenchmarkDefinition):
        raise TypeError(f"{target} does not implement BenchmarkDefinition")
    return definition
