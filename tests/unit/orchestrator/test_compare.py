"""Backend agreement and determinism logic (orchestrator/compare.py): the pure core with
tables, and `compare_backends` on a small store written through the real schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from orchestrator.compare import (
    CompareError,
    agreement,
    compare_backends,
    flips,
    match_key,
    pair_settings,
    pass_at_1,
    per_backend,
    render_comparison,
    render_repeat_check,
    resolve_keys,
)
from orchestrator.config import load_run_config
from orchestrator.grid import Environment, expand_grid
from orchestrator.records import execution_rows, generation_rows, score_row, setting_row
from storage.schema import SettingStatus
from storage.store import Store
from workers.keys import canonical_json, setting_fields
from workers.spec import ExecutionRecord, Outcome, SampleRecord

NOW = datetime(2025, 1, 2, tzinfo=UTC)


def cells(overrides):
    return expand_grid(load_run_config(overrides), "datahash", Environment(vllm_installed=True))


def setting_json(cell) -> str:
    return canonical_json(setting_fields(cell.setting))


# -- match_key / pair_settings -------------------------------------------------------------------


def test_settings_that_differ_only_in_the_backend_share_a_match_key():
    grid = cells(["grid.backend=hf,vllm", "grid.decoding=greedy,t0.8", "seed_policy=per_sample"])
    assert len(grid) == 4
    by_match = {}
    for c in grid:
        by_match.setdefault(match_key(setting_json(c)), set()).add(
            (c.setting.engine.backend.value, c.setting.decoding.name)
        )
    assert sorted(map(sorted, by_match.values())) == [
        [("hf", "greedy"), ("vllm", "greedy")], [("hf", "t0.8"), ("vllm", "t0.8")],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (["backend=hf"], ["backend=vllm"], True),
        (["backend=hf", "hf.device=cpu"], ["backend=vllm"], True),  # a backend-only option
        (["backend=hf"], ["backend=vllm", "vllm.batch_invariant=true"], True),
        (["backend=hf", "seed=1"], ["backend=vllm", "seed=2"], True),  # greedy: seed not keyed
        (["backend=hf", "decoding=t0.8", "seed=1", "seed_policy=per_sample"],
         ["backend=vllm", "decoding=t0.8", "seed=2", "seed_policy=per_sample"], False),
        (["backend=hf", "decoding=t0.8"], ["backend=vllm", "decoding=t0.8",
                                          "seed_policy=per_sample"], False),
        (["backend=hf", "template=instruct"], ["backend=vllm"], False),
        (["backend=hf", "max_length=512"], ["backend=vllm"], False),
        (["backend=hf", "precision=bf16"], ["backend=vllm"], False),
        (["backend=hf", "benchmark.limit=20"], ["backend=vllm"], False),
    ],
)  # fmt: skip
def test_match_key_table(a, b, same):
    (ca,), (cb,) = cells(a), cells(b)
    assert (match_key(setting_json(ca)) == match_key(setting_json(cb))) is same


def _row(key, backend, match="m"):
    fields = {"v": 1, "engine": {"backend": backend, "model": "x"}, "template": match}
    return {"setting_key": key, "backend": backend, "setting_json": json.dumps(fields)}


def test_pair_settings_pairs_across_backends_only_reference_first():
    rows = [_row("k1", "vllm"), _row("k2", "hf"), _row("k3", "hf"), _row("k4", "vllm", "other")]
    pairs, unpaired = pair_settings(rows)
    assert [(p.a["setting_key"], p.b["setting_key"]) for p in pairs] == [("k2", "k1"), ("k3", "k1")]
    assert unpaired == 1


# -- agreement, pass@1, flips ----------------------------------------------------------------------


def test_pass_at_1_averages_per_problem_fractions():
    passed = {("a", 0): True, ("a", 1): False, ("b", 0): False, ("b", 1): False}
    assert pass_at_1(passed) == 0.25
    assert pass_at_1({}) is None


def test_agreement_counts_programs_outcomes_and_the_pass_at_1_difference():
    progs_a = {("t1", 0): "x", ("t2", 0): "y", ("t3", 0): "z", ("t4", 0): "only-a"}
    progs_b = {("t1", 0): "x", ("t2", 0): "Y", ("t3", 0): "Z"}
    pass_a = {("t1", 0): True, ("t2", 0): False, ("t3", 0): True, ("t4", 0): True}
    pass_b = {("t1", 0): True, ("t2", 0): False, ("t3", 0): False}
    got = agreement(progs_a, pass_a, progs_b, pass_b)
    assert got["n_samples"] == 3  # t4 only in a
    assert got["identical_programs"] == pytest.approx(1 / 3)
    assert got["same_outcome"] == pytest.approx(2 / 3)
    assert got["pass_at_1_a"] == pytest.approx(2 / 3)
    assert got["pass_at_1_b"] == pytest.approx(1 / 3)
    assert got["pass_at_1_diff"] == pytest.approx(-1 / 3)
    assert got["differing_tasks"] == ["t2", "t3"]
    assert agreement({}, {}, progs_b, pass_b)["identical_programs"] is None


def test_flips_and_per_backend_totals():
    old = {("t1", 0): {"program": "p", "continuation": "c", "output_token_ids": [1, 2]},
           ("t2", 0): {"program": "q", "continuation": "d", "output_token_ids": [3]}}  # fmt: skip
    new = {("t1", 0): {"program": "p", "continuation": "c2", "output_token_ids": [1, 2, 5]},
           ("t2", 0): {"program": "Q", "continuation": "D", "output_token_ids": [4]}}  # fmt: skip
    got = flips(old, new)
    assert (got["n_samples"], got["n_flipped"], got["flip_rate"]) == (2, 1, 0.5)
    assert (got["n_continuation_changed"], got["n_tokens_changed"]) == (2, 2)
    assert got["flipped_tasks"] == ["t2"]
    totals = per_backend([{"backend": "vllm", **got}, {"backend": "vllm", **got},
                          {"backend": "hf", **flips(old, old)}])  # fmt: skip
    assert totals["vllm"] == {"n_settings": 2, "n_samples": 4, "n_flipped": 2, "flip_rate": 0.5}
    assert totals["hf"]["flip_rate"] == 0.0
    text = render_repeat_check({"n_problems": 2, "per_backend": totals, "settings": [
        {"setting_key": "k" * 64, "backend": "vllm", "precision": "fp32", "template": "yi",
         "decoding": "greedy", "max_length": 512, **got}]})  # fmt: skip
    assert "vllm: flip rate 50.0% (2/4 samples, 2 setting(s))" in text and "tasks: t2" in text


# -- compare_backends on a store -------------------------------------------------------------------


def _write_setting(store: Store, cell, programs: list[str], passed: list[bool]) -> None:
    key, setting = cell.key, cell.setting
    samples = [SampleRecord(f"Python/{i}", 0, "prompt", "cont", p, 10, 5, False, False)
               for i, p in enumerate(programs)]  # fmt: skip
    records = [ExecutionRecord(f"Python/{i}", 0, Outcome.PASSED if ok else Outcome.FAILED,
                               float(ok), None, None, 0.1)
               for i, ok in enumerate(passed)]  # fmt: skip
    gens, execs = generation_rows(key, samples), execution_rows(key, records)
    store.write_rows("generations", key, gens)
    store.write_rows("executions", key, execs)
    store.write_rows("scores", key, [score_row(key, setting, gens, execs)])
    store.write_rows("settings", key, [setting_row(key, setting, SettingStatus.COMPLETE, now=NOW,
                                                   run_id="r1")])  # fmt: skip


def test_compare_backends_reads_pairs_from_the_store(tmp_path):
    store = Store(str(tmp_path / "store"))
    grid = {(c.setting.engine.backend.value, c.setting.decoding.name): c
            for c in cells(["grid.backend=hf,vllm", "grid.decoding=greedy,t0.8",
                            "seed_policy=per_sample"])}  # fmt: skip
    _write_setting(store, grid["hf", "greedy"], ["a", "b", "c", "d"], [True, False, False, True])
    _write_setting(store, grid["vllm", "greedy"], ["a", "b", "C", "d"], [True, False, True, True])
    _write_setting(store, grid["hf", "t0.8"], ["a", "b", "c", "d"], [False] * 4)  # no partner
    data = compare_backends(store)
    assert (data["n_complete_settings"], data["n_pairs"], data["n_unpaired"]) == (3, 1, 1)
    (pair,) = data["pairs"]
    assert (pair["backend_a"], pair["backend_b"], pair["decoding"]) == ("hf", "vllm", "greedy")
    assert pair["identical_programs"] == 0.75 and pair["same_outcome"] == 0.75
    assert pair["pass_at_1_diff"] == pytest.approx(0.25)
    assert pair["differing_tasks"] == ["Python/2"]
    text = render_comparison(data)
    assert "hf/vllm" in text and "75.0" in text and "+25.0" in text and "Python/2" in text
    # repeat-check's key resolution: prefixes, and only complete settings
    hf_key = grid["hf", "greedy"].key
    assert resolve_keys(store, [hf_key[:10]])[0]["setting_key"] == hf_key
    with pytest.raises(CompareError, match="matches no setting"):
        resolve_keys(store, ["zzzz"])
