"""The benchmark registry and the contract: both shipped benchmarks implement the protocols,
unknown names get a suggestion, and a third benchmark plans through the unchanged driver once
it is registered (docs/benchmarks.md)."""

from __future__ import annotations

import json

import pytest

from orchestrator.cli import main
from workers.benchmarks import registry
from workers.benchmarks.base import Benchmark, BenchmarkDefinition, BenchmarkSource
from workers.benchmarks.registry import BENCHMARKS, UnknownBenchmark, get_benchmark


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_shipped_benchmarks_implement_the_protocols(name, shared_data):
    definition = get_benchmark(name)
    assert isinstance(definition, BenchmarkDefinition) and definition.name == name
    loaded = definition.load(
        BenchmarkSource(name, definition.variants[0], "local", "main", str(shared_data))
    )
    assert isinstance(loaded, Benchmark) and loaded.name == name
    assert len(loaded.problem_ids()) == {"humanevalfix": 164, "infibench": 234}[name]
    assert len(loaded.data_sha256) == 64


def test_an_unknown_benchmark_is_refused_with_a_suggestion():
    with pytest.raises(UnknownBenchmark, match="Did you mean: infibench"):
        get_benchmark("infibnch")


def test_a_third_benchmark_plans_through_the_unchanged_driver(env, capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(
        registry.BENCHMARKS, "toy", "tests.unit.workers.benchmarks.toy_benchmark:TOY"
    )
    args = [
        "plan",
        "--json",
        "model=tiny",
        "benchmark.name=toy",
        "benchmark.variant=v1",
        "template=own,plain",
        "decoding=greedy,t0.2",
        f"store={tmp_path}",
    ]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    settings = [s for e in data["engines"] for s in e["settings"]]
    # own resolves to the toy's "plain" (one cell), and the toy's own skip rule applies
    assert sorted((s["template"], s["decoding"], s["action"]) for s in settings) == [
        ("plain", "greedy", "generate"),
        ("plain", "t0.2", "skip"),
    ]
    assert data["generations"] == 2  # the toy's two problems
    assert main([*args[:-1], "template=fancy", f"store={tmp_path}"]) == 2
    assert "Unknown template 'fancy'" in capsys.readouterr().err
