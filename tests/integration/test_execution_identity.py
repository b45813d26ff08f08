"""Every option that changes an execution outcome is part of the execution identity (Trust §6):
changing one executes the stored generations again, never generates them again, and never
reuses a stale outcome."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from orchestrator.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_changing_a_limit_reexecutes_and_never_regenerates(env, capsys, tmp_path):
    replay = tmp_path / "replay.jsonl"
    shutil.copy(FIXTURES / "store_v1_replay.jsonl", replay)
    store = tmp_path / "store"
    grid = [
        "model=deepseekcoder-1.3b-instruct",
        "benchmark.limit=3",
        "backend=replay",
        f"replay_path={replay}",
        "template=own,instruct",
        f"store={store}",
    ]

    def run(*extra) -> dict:
        assert main(["run", "--json", *grid, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    first = run()
    assert (first["generated"], first["executed"]) == (2, 2)
    generations = {p.name: p.read_bytes() for p in (store / "generations").glob("*.parquet")}
    assert (run()["generated"], run()["executed"]) == (0, 0)

    assert main(["plan", "--json", *grid, "execution.timeout_s=5"]) == 0
    planned = [s for e in json.loads(capsys.readouterr().out)["engines"] for s in e["settings"]]
    assert {s["action"] for s in planned} == {"execute"}
    assert all("limit.timeout_s 10.0 -> 5.0" in s["reason"] for s in planned)

    changed = run("execution.timeout_s=5")
    assert (changed["generated"], changed["executed"]) == (0, 2)
    again = run("execution.timeout_s=5")
    assert (again["generated"], again["executed"]) == (0, 0)
    back = run("execution.memory_mb=2048")  # another limit: executed again, too
    assert (back["generated"], back["executed"]) == (0, 2)
    assert {p.name: p.read_bytes() for p in (store / "generations").glob("*.parquet")} == (
        generations
    )
    settings = pd.read_parquet(store / "settings")
    fields = [json.loads(j) for j in settings["execution_json"]]
    assert {f["limits"]["memory_mb"] for f in fields} == {2048}
    assert {f["environment"]["isolation"] for f in fields} <= {"process", "namespaces", "full"}
    executions = pd.read_parquet(store / "executions")
    assert executions["isolation"].notna().all()
