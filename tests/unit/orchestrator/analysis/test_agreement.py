"""Backend agreement and the flip rate (orchestrator/analysis/agreement.py): pure functions,
checked with tables."""

from __future__ import annotations

import json

import pytest

from orchestrator.analysis.agreement import (
    agreement,
    engine_label,
    flips,
    match_key,
    pair_settings,
    per_backend,
)
from orchestrator.run.config.load import load_run_config
from orchestrator.run.prepare.grid import Environment, expand_grid
from workers.keys import canonical_json, setting_fields


def cells(overrides):
    config = load_run_config(["model=tiny", *overrides])
    return expand_grid(config, "datahash", Environment(installed=frozenset({"hf", "vllm"})))


def setting_json(cell) -> str:
    return canonical_json(setting_fields(cell.setting))


# -- match_key / pair_settings -------------------------------------------------------------------


def test_settings_that_differ_only_in_the_backend_share_a_match_key():
    grid = cells(["grid.backend=hf,vllm", "grid.decoding=greedy,t0.8", "seed_policy=per_sample"])
    assert len(grid) == 4
    by_match = {}
    for c in grid:
        by_match.setdefault(match_key(setting_json(c)), set()).add(
            (c.setting.engine.backend, c.setting.decoding.name)
        )
    assert sorted(map(sorted, by_match.values())) == [
        [("hf", "greedy"), ("vllm", "greedy")],
        [("hf", "t0.8"), ("vllm", "t0.8")],
    ]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (["backend=hf"], ["backend=vllm"], True),
        (["backend=hf", "hf.device=cpu"], ["backend=vllm"], True),  # a backend-only option
        (["backend=hf"], ["backend=vllm", "vllm.batch_invariant=true"], True),
        (["backend=hf", "seed=1"], ["backend=vllm", "seed=2"], True),  # greedy: seed not keyed
        (
            ["backend=hf", "decoding=t0.8", "seed=1", "seed_policy=per_sample"],
            ["backend=vllm", "decoding=t0.8", "seed=2", "seed_policy=per_sample"],
            False,
        ),
        (
            ["backend=hf", "decoding=t0.8"],
            ["backend=vllm", "decoding=t0.8", "seed_policy=per_sample"],
            False,
        ),
        (["backend=hf", "template=instruct"], ["backend=vllm"], False),
        (["backend=hf", "max_length=512"], ["backend=vllm"], False),
        (["backend=hf", "precision=bf16"], ["backend=vllm"], False),
        (["backend=hf", "benchmark.limit=20"], ["backend=vllm"], False),
    ],
)
def test_match_key_table(a, b, same):
    (ca,), (cb,) = cells(a), cells(b)
    assert (match_key(setting_json(ca)) == match_key(setting_json(cb))) is same


def _row(key, backend, match="m", claimed=None, replay_sha256=None):
    engine = {"backend": backend, "model": "x"}
    if replay_sha256 is not None:
        engine["replay_sha256"] = replay_sha256
    fields = {"v": 1, "engine": engine, "template": match}
    return {
        "setting_key": key,
        "backend": backend,
        "claimed_backend": claimed,
        "setting_json": json.dumps(fields),
        # what a replayed or imported setting records: no device generated its text here
        "device": None if replay_sha256 is not None else "cpu",
    }


def test_an_import_pairs_with_the_run_it_claims_to_reproduce_only():
    """A replayed file (its own sha256 in the key) matches the run of its setting; it pairs with
    the backend it claims, never with another backend, another import or without a claim."""
    rows = [
        _row("run-hf", "hf"),
        _row("run-vllm", "vllm"),
        _row("imp-hf", "replay", claimed="hf", replay_sha256="1" * 64),
        _row("imp-hf-2", "replay", claimed="hf", replay_sha256="2" * 64),
        _row("imp-vllm", "replay", claimed="vllm", replay_sha256="3" * 64),
        _row("unclaimed", "replay", replay_sha256="4" * 64),  # a store written before claims
        _row("imp-other", "replay", "other", claimed="hf", replay_sha256="5" * 64),
    ]
    pairs, unpaired = pair_settings(rows)
    assert sorted((p.a["setting_key"], p.b["setting_key"]) for p in pairs) == [
        ("run-hf", "imp-hf"),
        ("run-hf", "imp-hf-2"),
        ("run-hf", "run-vllm"),
        ("run-vllm", "imp-vllm"),
    ]
    assert unpaired == 2  # the unclaimed import, and the import of another setting


def test_pair_settings_pairs_across_backends_only_reference_first():
    rows = [_row("k1", "vllm"), _row("k2", "hf"), _row("k3", "hf"), _row("k4", "vllm", "other")]
    pairs, unpaired = pair_settings(rows)
    assert [(p.a["setting_key"], p.b["setting_key"]) for p in pairs] == [("k2", "k1"), ("k3", "k1")]
    assert unpaired == 1


def test_batched_transformers_pairs_with_batch_one_batch_one_first():
    """The same backend with another keyed option is another engine variant: batched
    transformers (hf_batch_size) pairs with batch 1, which is the reference."""
    grid = cells(["backend=hf", "grid.decoding=greedy,t0.8", "seed_policy=per_sample"])
    batched = cells(
        ["backend=hf", "grid.decoding=greedy,t0.8", "seed_policy=per_sample"]
        + ["generation.batch_size=8"]
    )
    rows = [
        {
            "setting_key": c.key,
            "backend": "hf",
            "claimed_backend": None,
            "device": "cpu",
            "setting_json": setting_json(c),
        }
        for c in batched + grid
    ]
    pairs, unpaired = pair_settings(rows)
    assert unpaired == 0 and len(pairs) == 2
    assert {p.a["setting_key"] for p in pairs} == {c.key for c in grid}
    assert {engine_label(p.a) for p in pairs} == {"hf"}
    assert {engine_label(p.b) for p in pairs} == {"hf(hf_batch_size=8)"}
    # two batch-1 settings of the same variant are not a pair
    assert pair_settings(rows[2:] + rows[2:3])[0] == []


# -- agreement, pass@1, flips ----------------------------------------------------------------------


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
    old = {
        ("t1", 0): {"program": "p", "continuation": "c", "output_token_ids": [1, 2]},
        ("t2", 0): {"program": "q", "continuation": "d", "output_token_ids": [3]},
    }
    new = {
        ("t1", 0): {"program": "p", "continuation": "c2", "output_token_ids": [1, 2, 5]},
        ("t2", 0): {"program": "Q", "continuation": "D", "output_token_ids": [4]},
    }
    got = flips(old, new)
    assert (got["n_samples"], got["n_flipped"], got["flip_rate"]) == (2, 1, 0.5)
    assert (got["n_continuation_changed"], got["n_tokens_changed"]) == (2, 2)
    assert got["flipped_tasks"] == ["t2"]
    totals = per_backend(
        [
            {"backend": "vllm", **got},
            {"backend": "vllm", **got},
            {"backend": "hf", **flips(old, old)},
        ]
    )
    assert totals["vllm"] == {"n_settings": 2, "n_samples": 4, "n_flipped": 2, "flip_rate": 0.5}
    assert totals["hf"]["flip_rate"] == 0.0
