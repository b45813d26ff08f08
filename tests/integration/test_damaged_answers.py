"""A damaged file of a store a real run wrote (the tiny model through Ray, the sandbox and the
store): `report` refuses the store (exit 1, the file named, `verify --fix` the way out), answers
without its setting and names it with --skip-damaged, and after `verify --fix` and the next
`run` (which redoes the setting) answers whole again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.unit.storage.damage import flip_data_page_bit

GRID = ["model=tiny", "template=own,instruct", "max_length=320", "benchmark.limit=4"]


def reprogrid(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def grid_keys(out: Path) -> set[str]:
    document = json.loads((out / "report.json").read_text())
    return {row["setting_key"] for row in document["tables"]["grid"]["rows"]}


def test_a_real_store_with_a_damaged_file_is_refused_named_then_repaired(env, tmp_path):
    store = tmp_path / "store"
    done = reprogrid(env, "run", *GRID, f"store={store}")
    assert done.returncode == 0, done.stdout + done.stderr
    keys = sorted(pd.read_parquet(store / "settings").setting_key)
    assert len(keys) == 2
    path = store / "executions" / f"{keys[0]}.parquet"
    path.write_bytes(flip_data_page_bit(path.read_bytes(), "passed"))  # one bit of one outcome

    report = ("report", "--store", str(store), "--format", "md,json", "--resamples", "200")
    out = tmp_path / "report"
    done = reprogrid(env, *report, "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"executions/{path.name}" in done.stderr and "reprogrid verify --fix" in done.stderr
    assert not out.exists()

    done = reprogrid(env, *report, "--out", str(out), "--skip-damaged")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"note: left out setting {keys[0][:12]}: damaged executions/{path.name}" in done.stdout
    assert grid_keys(out) == {keys[1]}
    assert keys[0][:12] in (out / "report.md").read_text().split("\n## ", 1)[0]

    fixed = reprogrid(env, "verify", "--fix", "--store", str(store))
    assert fixed.returncode == 1 and not path.exists(), fixed.stdout + fixed.stderr
    done = reprogrid(env, "run", *GRID, f"store={store}")
    assert done.returncode == 0, done.stdout + done.stderr
    whole = tmp_path / "whole"
    done = reprogrid(env, *report, "--out", str(whole))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "left out" not in done.stdout and grid_keys(whole) == set(keys)
