"""A finished store, damaged in every way the integrity checks know: `reprogrid verify` finds
each damage and exits 1, moves nothing; the next plain `run` quarantines the damaged files
(never deleting them), redoes exactly the damaged settings, and ends with the undamaged scores
(Trust §5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.cli import main
from tests.unit.storage.damage import flip_data_page_bit, garbage_in_data, truncate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TABLES = ("settings", "generations", "executions", "scores", "runs")


def grid(tmp_path: Path) -> list[str]:
    replay = tmp_path / "replay.jsonl"
    shutil.copy(FIXTURES / "store_v1_replay.jsonl", replay)
    return [
        "model=deepseekcoder-1.3b-instruct",
        "benchmark.limit=3",
        "max_length=2048",
        "backend=replay",
        f"replay_path={replay}",
        "template=own,instruct,starchat,octocoder",
        "precision=bf16,fp16",
        f"store={tmp_path / 'store'}",
        "cluster.num_cpus=2",
    ]


def run(args, capsys) -> dict:
    assert main(["run", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def damage(path: Path, how) -> bytes:
    broken = how(path.read_bytes() if path.exists() else b"")
    path.write_bytes(broken)
    return broken


def shard(store: Path, table: str, key: str) -> Path:
    """The setting's shard of a table (generations: its first chunk)."""
    return sorted((store / table).glob(f"{key}*.parquet"))[0]


def scores(store: Path) -> dict[str, float]:
    frame = pd.read_parquet(store / "scores")
    return dict(zip(frame["setting_key"], frame["pass_at_1"], strict=True))


def test_verify_finds_every_damage_and_run_redoes_exactly_the_damaged_settings(
    env, capsys, tmp_path
):
    args = grid(tmp_path)
    first = run(args, capsys)
    assert first["generated"] == 8 and first["failed"] == 0
    store = tmp_path / "store"
    before = scores(store)
    assert main(["verify", "--store", str(store)]) == 0
    capsys.readouterr()

    keys = sorted(before)
    chunks = {i: shard(store, "generations", keys[i]).name for i in (0, 4)}
    run_shard = next((store / "runs").glob("*.parquet"))
    broken = [
        damage(shard(store, "generations", keys[0]), truncate),
        damage(store / "executions" / f"{keys[1]}.parquet", garbage_in_data),
        damage(
            store / "scores" / f"{keys[2]}.parquet", lambda b: flip_data_page_bit(b, "pass_at_1")
        ),
        damage(
            store / "settings" / f"{keys[3]}.parquet", lambda b: flip_data_page_bit(b, "status")
        ),
        damage(shard(store, "generations", keys[4]), lambda b: flip_data_page_bit(b, "program")),
        damage(run_shard, lambda b: flip_data_page_bit(b, "status")),
        damage(store / "executions" / "notes.txt", lambda _: b"not a shard"),
    ]
    damaged = {p: p.read_bytes() for t in TABLES for p in (store / t).iterdir()}

    assert main(["verify", "--store", str(store), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    where = {(p["table"], p["file"]) for p in report["problems"] if p["file"]}
    assert {
        ("generations", chunks[0]),
        ("executions", f"{keys[1]}.parquet"),
        ("scores", f"{keys[2]}.parquet"),
        ("settings", f"{keys[3]}.parquet"),
        ("generations", chunks[4]),
        ("runs", run_shard.name),
        ("executions", "notes.txt"),
    } <= where
    assert set(report["settings_to_redo"]) == set(keys[:5])
    assert {p: p.read_bytes() for p in damaged} == damaged  # a reader moves nothing

    again = run(args, capsys)
    # generations lost (truncated, corrupt) or the settings row lost: generate again; only
    # executions or the score lost: execute the stored generations again
    assert again["generated"] == 3 and again["executed"] == 5
    assert scores(store) == before
    for table in TABLES:
        pd.read_parquet(store / table)  # every table reads again
    # nothing is deleted: every damaged file that is gone or rewritten is in the quarantine
    quarantined = {p.read_bytes() for p in (store / "quarantine").rglob("*") if p.is_file()}
    assert set(broken) <= quarantined
    assert main(["verify", "--store", str(store)]) == 0


@pytest.mark.heavy
def test_a_run_on_a_compacted_store_redoes_exactly_what_a_damaged_pack_held(env, capsys, tmp_path):
    """The same store compacted (as the end of a run leaves it), a bit flipped in its scores
    pack and a generations shard truncated: `verify` finds both; the next run quarantines the
    pack, gives back nothing it cannot vouch for, redoes the settings it held (execution only)
    and the truncated one (generation), writing into the packed settings rows (their pack is
    dissolved first), and ends with the same scores, each row once for every reader."""
    args = grid(tmp_path)
    run(args, capsys)
    store = tmp_path / "store"
    before = scores(store)
    assert main(["compact", "--store", str(store)]) == 0
    capsys.readouterr()
    [pack] = (store / "scores").glob("pack-*.parquet")
    pack.write_bytes(flip_data_page_bit(pack.read_bytes(), "pass_at_1"))
    keys = sorted(before)
    damage(shard(store, "generations", keys[0]), truncate)
    assert main(["verify", "--store", str(store), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert {(p["table"], p["file"]) for p in report["problems"] if p["file"]} == {
        ("scores", pack.name),
        ("generations", shard(store, "generations", keys[0]).name),
    }
    assert set(report["settings_to_redo"]) == set(keys)  # one row group held every score
    again = run(args, capsys)
    assert again["generated"] == 1 and again["executed"] == 8
    assert scores(store) == before
    for table, row_key in (
        ("settings", ["setting_key"]),
        ("scores", ["setting_key"]),
        ("executions", ["setting_key", "task_id", "sample_index"]),
        ("generations", ["setting_key", "task_id", "sample_index"]),
    ):
        frame = pd.read_parquet(store / table)
        assert not frame.duplicated(row_key).any(), table  # each row once for a plain reader
    assert main(["compact", "--store", str(store)]) == 0
    assert main(["verify", "--store", str(store)]) == 0
    assert scores(store) == before
