"""Batched transformers for real: `reprogrid run ... generation.batch_size=8` on the tiny model
(fp32 and bitsandbytes 8-bit, greedy and sampled) through Ray, the sandbox and the store, then
the same grid at batch 1 into the same store, and `compare-backends` pairing each batched
setting with its batch-1 twin and recording how their programs differ."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

GRID = [
    "model=tiny",
    "precision=fp32,int8",
    "decoding=greedy,t0.8",
    "seed_policy=per_sample",
    "template=instruct",
    "max_length=512",
    # 12 problems: a batch of 8 fills, then refills as its calls end
    "benchmark.limit=12",
]


def reprogrid(env, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "orchestrator.cli", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_a_batched_run_and_its_batch_one_twin_are_compared(env, tmp_path):
    store = tmp_path / "store"
    reprogrid(env, "run", *GRID, "backend=hf", "generation.batch_size=8", f"store={store}")
    settings = pd.read_parquet(store / "settings")
    assert set(settings.status) == {"complete"} and len(settings) == 4
    options = [json.loads(o) for o in settings.engine_options_json]
    assert {o["batch_size"] for o in options} == {"8"}
    batched_keys = set(settings.setting_key)

    reprogrid(env, "run", *GRID, "backend=hf", f"store={store}")
    settings = pd.read_parquet(store / "settings")
    assert len(settings) == 8 and set(settings.status) == {"complete"}

    data = json.loads(reprogrid(env, "compare-backends", "--store", str(store), "--json").stdout)
    assert data["n_pairs"] == 4 and data["n_unpaired"] == 0
    for pair in data["pairs"]:
        assert (pair["engine_a"], pair["engine_b"]) == ("hf", "hf(hf_batch_size=8)")
        assert pair["setting_key_b"] in batched_keys and pair["n_samples"] == 12
        assert pair["n_differing_programs"] == round((1 - pair["identical_programs"]) * 12)
    by = {(p["precision"], p["decoding"]): p for p in data["pairs"]}
    # fp32 greedy: what batch 1 generates; the others are recorded, whatever they are (a
    # sample's draw can move across a token boundary with the padded steps' rounding)
    assert by[("fp32", "greedy")]["identical_programs"] == 1.0
    assert {by[k]["n_samples"] for k in by} == {12} and len(by) == 4
