"""The backend registry and the contract every backend keeps: resolved lazily by name, a typo
refused with a suggestion, and a backend the project does not ship (tests' toy) planned by the
unchanged driver through its definition alone."""

from __future__ import annotations

import json

import pytest

from orchestrator.cli import main
from workers.backends import registry
from workers.backends.base import BackendDefinition, UnknownBackend
from workers.backends.registry import BACKENDS, backend_definitions, get_backend

TOY = "tests.unit.workers.backends.toy_backend:TOY"


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_shipped_backend_has_a_definition_named_as_registered(name):
    definition = get_backend(name)
    assert isinstance(definition, BackendDefinition) and definition.name == name
    assert definition.engine.count(":") == 1 and definition.export_name
    for field in definition.option_fields:
        assert field.name in definition.options_type.__dataclass_fields__


def test_an_unknown_backend_is_refused_with_a_suggestion():
    with pytest.raises(UnknownBackend, match="Did you mean: vllm"):
        get_backend("vlm")


def test_auto_ranks_prefer_batching_and_fall_back_to_the_harness_backend():
    ranked = sorted(
        (d for d in backend_definitions() if d.auto_rank is not None),
        key=lambda d: d.auto_rank or 0,
    )
    assert [d.batched for d in ranked] == [False, True]


def plan(capsys, tmp_path, *overrides):
    args = ["plan", "--json", "model=tiny", "benchmark.limit=2", "template=own"]
    code = main([*args, *overrides, f"store={tmp_path}"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def test_a_third_backend_plans_through_the_unchanged_driver(env, capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(registry.BACKENDS, "toy", TOY)
    code, data, err = plan(capsys, tmp_path, "backend=toy", "precision=fp32,int8")
    assert code == 0, err
    (engine,) = [e for e in data["engines"] if e["settings"][0]["action"] == "generate"]
    assert engine["backend"] == "toy" and engine["backend_options"] == {
        "answer": "\n    return None\n"
    }
    actions = sorted((s["precision"], s["action"]) for e in data["engines"] for s in e["settings"])
    assert actions == [("fp32", "generate"), ("int8", "skip")]  # the toy's own skip rule
    skipped = [s for e in data["engines"] for s in e["settings"] if s["action"] == "skip"]
    assert skipped[0]["reason"] == "the toy backend does not quantize"
    # its options are keyed through its definition: the same cell on hf has another key
    code, hf, err = plan(capsys, tmp_path, "backend=hf", "precision=fp32")
    assert hf["engines"][0]["settings"][0]["setting_key"] != engine["settings"][0]["setting_key"]
    code, _, err = plan(capsys, tmp_path, "backend=toi")
    assert code == 2 and "Did you mean: toy?" in err
