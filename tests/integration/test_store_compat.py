"""A store written by an older reprogrid resumes unchanged: its setting keys are still the keys
today's code derives, so `plan` sees every setting as done and `run` redoes nothing.

The fixture (tests/fixtures/store_v1, see its README) was written at commit 50cb645, before the
orchestrator was restructured into wings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from orchestrator.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
COMMON = [
    "model=deepseekcoder-1.3b-instruct", "benchmark.limit=3", "max_length=2048",
    "precision=bf16", "backend=replay",
]  # fmt: skip
GRIDS = (
    ["template=own,instruct", "decoding=greedy"],
    ["template=own", "decoding=t0.8", "n_samples=2", "seed_policy=per_sample"],
)


def copy_store(tmp_path: Path) -> tuple[Path, Path]:
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_v1", store)
    replay = tmp_path / "replay.jsonl"
    shutil.copy(FIXTURES / "store_v1_replay.jsonl", replay)
    return store, replay


def test_an_old_store_plans_every_setting_as_done(env, capsys, tmp_path):
    store, replay = copy_store(tmp_path)
    stored = {p.stem for p in (store / "settings").glob("*.parquet")}
    planned = set()
    for grid in GRIDS:
        args = ["plan", "--json", *COMMON, *grid, f"replay_path={replay}", f"store={store}"]
        assert main(args) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["counts"]["done"] == data["n_settings"], data["counts"]
        planned |= {s["setting_key"] for e in data["engines"] for s in e["settings"]}
    assert planned == stored and len(stored) == 3


def test_an_old_store_runs_nothing_again_and_keeps_its_scores(env, capsys, tmp_path):
    store, replay = copy_store(tmp_path)
    before = {p.name: p.read_bytes() for p in (store / "scores").glob("*.parquet")}
    args = ["run", "--json", *COMMON, *GRIDS[0], f"replay_path={replay}", f"store={store}"]
    assert main(args) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert (outcome["generated"], outcome["executed"], outcome["engine_loads"]) == (0, 0, 0)
    assert {p.name: p.read_bytes() for p in (store / "scores").glob("*.parquet")} == before
    scores = pq.read_table(store / "scores").to_pylist()
    assert sorted(round(r["pass_at_1"], 4) for r in scores) == [0.1667, 0.3333, 0.3333]


def test_a_run_upgrades_old_shards_to_todays_columns(env, capsys, tmp_path):
    """Shards of the old schema lack the run-time facts: they read (as null) and verify, and
    the next writer rewrites them with every column so engines reading the folder see one
    schema; their rows are unchanged."""
    from storage.schema import TABLES

    store, replay = copy_store(tmp_path)
    old = pq.read_table(store / "settings").to_pylist()
    assert main(["verify", "--store", str(store)]) == 0
    capsys.readouterr()
    args = ["run", "--json", *COMMON, *GRIDS[0], f"replay_path={replay}", f"store={store}"]
    assert main(args) == 0
    capsys.readouterr()
    for path in (store / "settings").glob("*.parquet"):
        assert pq.read_schema(path).names == TABLES["settings"].names
    new = {r["setting_key"]: r for r in pq.read_table(store / "settings").to_pylist()}
    for row in old:
        kept = {k: v for k, v in new[row["setting_key"]].items() if k in row}
        assert kept == {k: v for k, v in row.items() if k in kept}
        assert new[row["setting_key"]]["template_kind"] is None  # not known for old rows
