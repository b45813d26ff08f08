"""A store written by an older reprogrid resumes unchanged: its setting keys are still the keys
today's code derives, so `plan` sees every setting as done and `run` redoes nothing.

The fixture (tests/fixtures/store_v1, see its README) was written at commit 50cb645, before the
orchestrator was restructured into wings; the others are described where they are used."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from orchestrator.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
COMMON = [
    "model=deepseekcoder-1.3b-instruct",
    "benchmark.limit=3",
    "max_length=2048",
    "precision=bf16",
    "backend=replay",
]
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


def test_an_old_store_plans_its_generations_as_done(env, capsys, tmp_path):
    """Every key is today's key: nothing is generated again. The old executions carry no
    execution identity, so they are executed again (docs/store.md, "Two identities")."""
    store, replay = copy_store(tmp_path)
    stored = {p.stem for p in (store / "settings").glob("*.parquet")}
    planned = set()
    for grid in GRIDS:
        args = ["plan", "--json", *COMMON, *grid, f"replay_path={replay}", f"store={store}"]
        assert main(args) == 0
        data = json.loads(capsys.readouterr().out)
        settings = [s for e in data["engines"] for s in e["settings"]]
        assert {s["action"] for s in settings} == {"execute"}, data["counts"]
        assert all("predate execution identities" in s["reason"] for s in settings)
        planned |= {s["setting_key"] for s in settings}
    assert planned == stored and len(stored) == 3


def test_an_old_store_generates_nothing_again_and_keeps_its_scores(env, capsys, tmp_path):
    store, replay = copy_store(tmp_path)
    before = sorted(round(r["pass_at_1"], 4) for r in pq.read_table(store / "scores").to_pylist())
    generations = pq.read_table(store / "generations").to_pylist()
    args = ["run", "--json", *COMMON, *GRIDS[0], f"replay_path={replay}", f"store={store}"]
    assert main(args) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert (outcome["generated"], outcome["executed"], outcome["engine_loads"]) == (0, 2, 0)
    # the same generations (the shards are upgraded to today's columns, their rows kept)
    after = pq.read_table(store / "generations").to_pylist()
    assert [{k: r[k] for k in g} for r, g in zip(after, generations, strict=True)] == generations
    scores = pq.read_table(store / "scores").to_pylist()
    assert sorted(round(r["pass_at_1"], 4) for r in scores) == before == [0.1667, 0.3333, 0.3333]
    # now with an execution identity: nothing to do (and, if not, the plan says why)
    assert main(["plan", "--json", *args[2:]]) == 0
    planned = [s for e in json.loads(capsys.readouterr().out)["engines"] for s in e["settings"]]
    assert {s["action"] for s in planned} == {"done"}, [s["reason"] for s in planned]
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["generated"], again["executed"]) == (0, 0)


def test_old_shards_are_upgraded_to_todays_columns(env, capsys, tmp_path):
    """Shards of the old schema lack the run-time facts and the execution identity: they read
    (as null) and verify; the writer rewrites them with every column (same rows), so engines
    reading the folder see one schema."""
    from storage.schema import TABLES
    from storage.store import Store
    from storage.upgrade import upgrade_shards

    store, replay = copy_store(tmp_path)
    assert main(["verify", "--store", str(store)]) == 0
    capsys.readouterr()
    # every table the old store has (it predates repeat_checks)
    old = {t: pq.read_table(store / t).to_pylist() for t in TABLES if (store / t).is_dir()}
    handle = Store(str(store))
    with handle.writer_lock():
        # the settings, generations, executions and scores shards of its 3 settings (scores got
        # the problem selection in schema version 3), and its 2 runs (their faults, version 7)
        assert upgrade_shards(handle) == 14
    for table, rows in old.items():
        for path in (store / table).glob("*.parquet"):
            assert pq.read_schema(path).names == TABLES[table].names
        new = pq.read_table(store / table).to_pylist()
        assert [{k: r[k] for k in o} for r, o in zip(new, rows, strict=True)] == rows
    assert main(["verify", "--store", str(store)]) == 0


# -- a store keyed by local folder paths (tests/fixtures/store_v3_pathkeys) ----------------------
# Written when a local folder entered the key by its path; today a folder is keyed by what it
# holds, so each setting is found under its old key (an alias) as long as the folder is where
# the store recorded it.
PATH_KEYED = [
    "model=tiny",
    "model.builder=null",
    "model.repo_id=models/local-tiny",
    "backend=replay",
    "replay_path=replay.jsonl",
    "benchmark.limit=3",
    "precision=fp32",
    "max_length=2048",
    "store=store",
]


def path_keyed_store(tmp_path: Path, monkeypatch) -> Path:
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_v3_pathkeys", store)
    shutil.copy(FIXTURES / "store_v1_replay.jsonl", tmp_path / "replay.jsonl")
    folder = tmp_path / "models" / "local-tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    monkeypatch.chdir(tmp_path)  # the fixture's paths are relative to where it was written
    return store


def test_a_store_keyed_by_folder_paths_plans_as_done(env, capsys, tmp_path, monkeypatch):
    store = path_keyed_store(tmp_path, monkeypatch)
    stored = {p.stem for p in (store / "settings").glob("*.parquet")}
    old_model = {
        json.loads(r["setting_json"])["engine"]["model"]
        for r in pq.read_table(store / "settings").to_pylist()
    }
    assert old_model == {"models/local-tiny"}  # the path was the model's identity
    planned = set()
    for grid in GRIDS:
        assert main(["plan", "--json", *PATH_KEYED, *grid]) == 0
        data = json.loads(capsys.readouterr().out)
        settings = [s for e in data["engines"] for s in e["settings"]]
        # done, or executed again where this host's execution identity differs; never generated
        assert {s["action"] for s in settings} <= {"done", "execute"}, data["counts"]
        planned |= {s["setting_key"] for s in settings}
    assert planned == stored and len(stored) == 3
    # a fresh store gets today's keys: the folder's content, not its path
    elsewhere = [*PATH_KEYED[:-1], f"store={tmp_path / 'fresh'}"]
    assert main(["plan", "--json", *elsewhere, *GRIDS[0]]) == 0
    fresh = json.loads(capsys.readouterr().out)
    fresh_keys = {s["setting_key"] for e in fresh["engines"] for s in e["settings"]}
    assert len(fresh_keys) == 2 and not fresh_keys & stored

    assert main(["run", "--json", *PATH_KEYED, *GRIDS[1]]) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["generated"] == 0 and outcome["grid_complete"]
    assert {p.stem for p in (store / "settings").glob("*.parquet")} == stored  # no new setting


def compact_store(store: Path) -> None:
    from storage.compact import compact
    from storage.store import Store

    handle = Store(str(store))
    with handle.writer_lock():
        compact(handle)


def test_an_old_store_compacted_plans_and_runs_as_before(env, capsys, tmp_path):
    """The v1 store packed (its shards conformed to today's columns on the way): the same plan,
    the same rows for every engine, a run that generates nothing again."""
    store, replay = copy_store(tmp_path)
    stored = {p.stem for p in (store / "settings").glob("*.parquet")}
    generations = pq.read_table(store / "generations").to_pylist()
    scores = sorted(round(r["pass_at_1"], 4) for r in pq.read_table(store / "scores").to_pylist())
    compact_store(store)
    assert not list((store / "scores").glob(f"{next(iter(stored))}*"))  # packed
    assert main(["verify", "--store", str(store)]) == 0
    capsys.readouterr()
    args = ["plan", "--json", *COMMON, *GRIDS[0], f"replay_path={replay}", f"store={store}"]
    assert main(args) == 0
    settings = [s for e in json.loads(capsys.readouterr().out)["engines"] for s in e["settings"]]
    assert {s["action"] for s in settings} == {"execute"}
    assert all("predate execution identities" in s["reason"] for s in settings)
    assert {s["generated_samples"] for s in settings} == {3}  # each setting's own samples
    packed = pq.read_table(store / "scores").to_pylist()
    assert sorted(round(r["pass_at_1"], 4) for r in packed) == scores
    run = ["run", "--json", *COMMON, *GRIDS[0], f"replay_path={replay}", f"store={store}"]
    assert main(run) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert (outcome["generated"], outcome["executed"]) == (0, 2)  # into the packs' settings
    after = pq.read_table(store / "generations").to_pylist()
    assert [{k: r[k] for k in g} for r, g in zip(after, generations, strict=True)] == generations
    assert len(pq.read_table(store / "scores")) == 3  # each setting once
    compact_store(store)
    assert main(["verify", "--store", str(store)]) == 0


# -- a chunked store whose provenance was merged as flat text (tests/fixtures/store_v5_chunks) --
# Written before provenance was structured: the settings row's `backend_version` repeats
# "transformers 5.19.0, torch 2.13.0+cpu" once per chunk (three). Every reader reads it back as
# each library once; a run that executes it again stores it structured.
CHUNKED = [
    "model=tiny",
    "benchmark.limit=3",
    "max_length=384",
    "template=instruct",
    "decoding=greedy",
    "checkpoint.every_samples=1",
    "cluster.num_cpus=2",
]
ONCE = {"torch": ("2.13.0+cpu",), "transformers": ("5.19.0",)}


def chunked_store(tmp_path: Path) -> tuple[Path, dict]:
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_v5_chunks", store)
    (row,) = pq.read_table(store / "settings").to_pylist()
    assert row["backend_version"] == ",".join(["transformers 5.19.0, torch 2.13.0+cpu"] * 3)
    return store, row


def test_a_chunked_old_store_reads_each_library_once(env, capsys, tmp_path):
    """The reader, the report's provenance table and the EEE export; the writer's upgrade adds
    the structured columns as null and the row still reads the same."""
    from storage.provenance import versions_of
    from storage.store import Store
    from storage.upgrade import upgrade_shards

    store, row = chunked_store(tmp_path)
    assert versions_of(row) == ONCE
    report = ["report", "--store", str(store), "--format", "csv", "--out", str(tmp_path / "r")]
    assert main(report) == 0
    (shown,) = pd.read_csv(tmp_path / "r" / "provenance_settings.csv").to_dict("records")
    assert shown["backend_version"] == "torch 2.13.0+cpu, transformers 5.19.0"
    assert (
        main(["export", "--store", str(store), "--format", "eee", "--out", str(tmp_path / "e")])
        == 0
    )
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "e" / "scores").rglob("*.json")]
    assert record["model_info"]["inference_engine"] == {"name": "transformers", "version": "5.19.0"}
    handle = Store(str(store))
    with handle.writer_lock():
        # the settings shard (scores had every column) and the run's (its faults, version 7)
        assert upgrade_shards(handle) == 2
    (upgraded,) = pq.read_table(store / "settings").to_pylist()
    assert upgraded["backend_versions_json"] is None and upgraded["hostnames"] is None
    assert versions_of(upgraded) == ONCE
    capsys.readouterr()
    assert main(["verify", "--store", str(store)]) == 0


def test_executing_a_chunked_old_setting_again_stores_its_provenance_structured(
    env, capsys, tmp_path
):
    """Another sandbox limit: the stored generations are executed again (nothing generated), and
    the settings row the run writes keeps their provenance, each library once."""
    store, old = chunked_store(tmp_path)
    args = ["run", "--json", *CHUNKED, "execution.timeout_s=11", f"store={store}"]
    assert main(args) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert (outcome["generated"], outcome["executed"], outcome["engine_loads"]) == (0, 1, 0)
    (row,) = pq.read_table(store / "settings").to_pylist()
    assert row["status"] == "complete"
    assert json.loads(row["backend_versions_json"]) == {k: list(v) for k, v in ONCE.items()}
    assert row["backend_version"] == "torch 2.13.0+cpu, transformers 5.19.0"
    assert (row["hostnames"], row["node_ids"]) == (["fixture-host"], [old["node_id"]])
    assert row["generation_started_at"] == old["generation_started_at"]
