"""`status` and `plan` say what is there (issue 22, §3): a damaged settings shard or result
chunk shows as `damaged` with the file, the reason and `verify --fix` as the way out (never a
setting that silently disappears or a `pending` without a reason); quarantined settings show
their record; during a live run `running` counts settings whose work was handed out and
`queued` the rest, and the generating engine is named; `--keys` shows a label beside a
12-character key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.report.screens.status import render_status, store_status
from storage.store import Store
from tests.fixtures_store import Spec, write_setting
from tests.processes import lock_held_elsewhere
from tests.unit.storage.damage import flip_data_page_bit, truncate

SPECS = [
    Spec("tiny", "own", "greedy", 2048, "fp32", 80),
    Spec("tiny", "own", "greedy", 512, "fp32", 70),
    Spec("tiny", "instruct", "greedy", 2048, "fp32", 60),
]


def three_settings(root: Path) -> list[str]:
    store = Store(str(root))
    return [write_setting(store, spec) for spec in SPECS]


def chunked(root: Path, key: str) -> None:
    """Store the setting's generations as two chunks instead of one shard."""
    store = Store(str(root))
    whole = store.read_shard("generations", key)
    (root / "generations" / f"{key}.parquet").unlink()
    store.write_table("generations", f"{key}~00000", whole.slice(0, 100))
    store.write_table("generations", f"{key}~00001", whole.slice(100))


def status_json(capsys, root: Path) -> dict:
    assert main(["status", "--store", str(root), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_bit_flip_in_a_settings_shard_shows_the_setting_as_damaged(capsys, tmp_path):
    keys = three_settings(tmp_path)
    shard = tmp_path / "settings" / f"{keys[1]}.parquet"
    shard.write_bytes(flip_data_page_bit(shard.read_bytes(), "status"))
    data = status_json(capsys, tmp_path)
    assert data["totals"]["complete"] == 2 and data["totals"]["damaged"] == 1
    assert sum(data["totals"].values()) == 3  # nothing disappeared
    [damaged] = data["damaged"]
    assert damaged["setting_key"] == keys[1]
    assert damaged["damage"][0].startswith(f"settings/{keys[1]}.parquet: ")
    assert main(["status", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"DAMAGED {keys[1][:12]}" in out and "reprogrid verify --fix" in out


def test_a_truncated_chunk_shows_as_damaged_in_status_and_plan(env, capsys, tmp_path):
    keys = three_settings(tmp_path)
    chunked(tmp_path, keys[0])
    chunk = tmp_path / "generations" / f"{keys[0]}~00001.parquet"
    chunk.write_bytes(truncate(chunk.read_bytes()))
    data = status_json(capsys, tmp_path)
    assert data["totals"]["damaged"] == 1 and data["totals"]["pending"] == 0
    [damaged] = data["damaged"]
    [what] = damaged["damage"]
    assert what.startswith(f"generations/{keys[0]}~00001.parquet: truncated (")
    text = render_status(store_status(Store(str(tmp_path))))
    assert f"DAMAGED {keys[0][:12]} tiny yi greedy L2048 fp32 hf:" in text  # own = yi


def test_plan_gives_the_reason_of_a_damaged_setting(env, capsys, tmp_path):
    from orchestrator.run.plan.planner import Action, plan_settings
    from orchestrator.run.prepare.grid import Cell
    from storage.index import build_index

    keys = three_settings(tmp_path)
    chunked(tmp_path, keys[0])
    chunk = tmp_path / "generations" / f"{keys[0]}~00001.parquet"
    chunk.write_bytes(truncate(chunk.read_bytes()))
    index = build_index(Store(str(tmp_path)))
    assert index[keys[0]].damage and not index[keys[0]].complete
    cell = Cell(keys[0], _setting(), None)
    [planned] = plan_settings([cell], index).settings
    assert planned.action is Action.GENERATE
    assert planned.reason is not None and planned.reason.startswith(
        f"damaged: generations/{keys[0]}~00001.parquet: truncated"
    )
    assert "verify --fix" in planned.reason


def _setting():
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.prepare.grid import Environment, expand_grid

    config = load_run_config(["model=tiny", "benchmark.limit=2"])
    return expand_grid(config, "0" * 64, Environment())[0].setting


def test_quarantined_settings_show_their_record_until_redone(capsys, tmp_path):
    keys = three_settings(tmp_path)
    shard = tmp_path / "scores" / f"{keys[2]}.parquet"
    shard.write_bytes(truncate(shard.read_bytes()))
    assert main(["verify", "--store", str(tmp_path), "--fix"]) == 1  # it found a problem
    capsys.readouterr()
    data = status_json(capsys, tmp_path)
    assert data["totals"]["damaged"] == 0 and data["totals"]["complete"] == 2
    [record] = data["quarantined"]
    assert record["setting_key"] == keys[2] and record["table"] == "scores"
    assert record["kind"] == "truncated" and record["moved_to"].startswith("quarantine/scores/")
    assert main(["status", "--store", str(tmp_path)]) == 0
    assert f"quarantined {keys[2][:12]}: scores/{keys[2]}.parquet (truncated)" in (
        capsys.readouterr().out
    )


def _live_run(root: Path, keys: list[str], statuses: dict[str, str]) -> None:
    import pandas as pd

    store = Store(str(root))
    for key, status in statuses.items():
        [row] = store.read_shard("settings", key).to_pylist()
        store.write_rows("settings", key, [row | {"status": status}])
    store.write_rows(
        "runs",
        "live",
        [
            {
                "run_id": "live",
                "started_at": pd.Timestamp.now(tz="UTC"),
                "command": "run",
                "overrides_json": "[]",
                "setting_keys": keys,
                "status": "running",
            }
        ],
    )


def test_a_live_run_counts_running_and_queued_apart_and_names_the_engine(capsys, tmp_path):
    keys = three_settings(tmp_path)
    chunked(tmp_path, keys[0])
    (tmp_path / "generations" / f"{keys[0]}~00001.parquet").unlink()  # mid-generation
    for table in ("executions", "scores"):
        for key in keys[:2]:
            (tmp_path / table / f"{key}.parquet").unlink()
    (tmp_path / "generations" / f"{keys[1]}.parquet").unlink()
    _live_run(tmp_path, keys, {keys[0]: "running", keys[1]: "queued", keys[2]: "complete"})
    with lock_held_elsewhere(tmp_path):
        data = status_json(capsys, tmp_path)
        text = render_status(store_status(Store(str(tmp_path))))
    assert (data["totals"]["running"], data["totals"]["queued"]) == (1, 1)
    [active] = data["active"]
    assert active["setting_key"] == keys[0] and active["doing"] == "generating"
    assert "generating now: tiny hf/fp32/none" in text and "(100 of 164 samples stored)" in text
    # the writer is gone: what was running or queued is pending (partial: its chunk is kept)
    data = status_json(capsys, tmp_path)
    assert data["totals"]["running"] == data["totals"]["queued"] == 0
    assert data["totals"]["partial"] == 1 and data["totals"]["pending"] == 1


def test_keys_show_a_label_beside_a_twelve_character_key(capsys, tmp_path):
    keys = three_settings(tmp_path)
    assert main(["status", "--store", str(tmp_path), "--keys"]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index(next(line for line in out if line.startswith("key ")))
    assert out[at].split() == ["key", "status", "setting"]
    listed = {line.split()[0]: line.split()[1:] for line in out[at + 1 :]}
    assert listed[keys[0][:12]] == ["complete", "tiny", "yi", "greedy", "L2048", "fp32", "hf"]
    assert listed[keys[2][:12]][2] == "instruct"
    assert sorted(listed) == sorted(k[:12] for k in keys)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_verify_fix_then_status_is_clean_of_damage(capsys, tmp_path, damage):
    keys = three_settings(tmp_path)
    shard = tmp_path / "generations" / f"{keys[0]}.parquet"
    payload = shard.read_bytes()
    shard.write_bytes(
        flip_data_page_bit(payload, "program") if damage == "flip" else truncate(payload)
    )
    assert status_json(capsys, tmp_path)["totals"]["damaged"] == 1
    main(["verify", "--store", str(tmp_path), "--fix"])
    capsys.readouterr()
    data = status_json(capsys, tmp_path)
    assert data["totals"]["damaged"] == 0 and len(data["quarantined"]) == 1


def test_a_compacted_store_reads_the_same_and_a_damaged_pack_names_what_it_lost(capsys, tmp_path):
    """Compacted (one member per row group), status answers as before and says so; a bit
    flipped in the scores pack's first row group, quarantined by `verify --fix`, shows that
    one setting as quarantined (the others' scores were given back)."""
    from storage.compact import PackPolicy, compact

    keys = sorted(three_settings(tmp_path))
    before = status_json(capsys, tmp_path)
    store = Store(str(tmp_path))
    with store.writer_lock():
        compact(store, PackPolicy(row_group_rows=1, row_group_rows_of={}))
    after = status_json(capsys, tmp_path)
    assert after["layout"] == {"packs": 3, "packed_shards": 9, "interrupted_compaction": False}
    assert {k: v for k, v in after.items() if k != "layout"} == {
        k: v for k, v in before.items() if k != "layout"
    }
    assert main(["status", "--store", str(tmp_path)]) == 0
    assert "(9 shards in 3 packs)" in capsys.readouterr().out
    [pack] = (tmp_path / "scores").glob("pack-*.parquet")
    pack.write_bytes(flip_data_page_bit(pack.read_bytes(), "value"))
    assert main(["verify", "--store", str(tmp_path), "--fix"]) == 1
    capsys.readouterr()
    data = status_json(capsys, tmp_path)
    assert data["totals"]["complete"] == 2
    assert [(q["setting_key"], q["table"]) for q in data["quarantined"]] == [(keys[0], "scores")]


def test_status_json_has_the_typed_shape_and_a_column_per_status(tmp_path, capsys):
    """`status --json` prints exactly the keys StatusReport types, and each engine's counts
    exactly EngineCounts' keys: the model, its engine and one per STATUSES column."""
    from typing import get_type_hints

    from orchestrator.report.screens.status import STATUSES
    from orchestrator.report.screens.statusreport import EngineCounts, StatusReport

    assert list(get_type_hints(EngineCounts)) == ["model", "engine", *STATUSES]
    three_settings(tmp_path)
    assert main(["status", "--store", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == set(get_type_hints(StatusReport))
    assert [set(e) for e in data["engines"]] == [set(get_type_hints(EngineCounts))]
    assert data["engines"][0]["complete"] == 3 == data["totals"]["complete"]
