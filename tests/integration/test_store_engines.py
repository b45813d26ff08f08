"""A finished store read with DuckDB and polars as well as pandas (the store's documented
promise): every table has the same rows in each engine, every shard of a table has the same
column types (skipped settings, whose provenance is all null, included), a reader that looks for
hive-style partitions finds none in the flat `<table>/<key>.parquet` layout and understands them
in a hive-partitioned copy, and the README's DuckDB query runs.

The store is made by a real `reprogrid run` through Ray and the sandbox with the replay backend
(no GPU library): 4 settings generated and 2 skipped. Runs in the full suite and in the driver
tier on Python 3.12 (`make test-driver`), which has made that store already with the installed
wheel's `reprogrid run` and names it in REPROGRID_TEST_DRIVER_STORE: a copy of it is read here.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from storage.schema import TABLES
from tests.conftest import REPO_ROOT, data_dir

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("engines")
    replay = root / "replay.jsonl"
    shutil.copy(FIXTURES / "store_v1_replay.jsonl", replay)
    env = {
        **os.environ,
        "REPROGRID_DATA_DIR": str(data_dir()),
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "REPROGRID_CACHE_DIR": str(root / "cache"),
    }
    made = os.environ.get("REPROGRID_TEST_DRIVER_STORE")
    if made:  # the same grid, run by the driver tier (Makefile: DRIVER_RUN)
        shutil.copytree(made, root / "store")
    else:
        cmd = [
            sys.executable,
            "-m",
            "orchestrator.cli",
            "run",
            "model=deepseekcoder-1.3b-instruct",
            "benchmark.limit=3",
            "max_length=2048",
            "backend=replay",
            f"replay_path={replay}",
            "template=own,instruct,diff",
            "precision=bf16,fp16",
            "cluster.num_cpus=2",
            f"store={root / 'store'}",
        ]
        done = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    # a repeat-check of two settings (the replay backend in this process) records its shard
    settings = pd.read_parquet(root / "store" / "settings")
    keys = sorted(settings[settings.status == "complete"].setting_key)[:2]
    check = [sys.executable, "-m", "orchestrator.cli", "repeat-check", "--store"]
    check += [str(root / "store"), "-n", "2", *[a for k in keys for a in ("--setting", k[:12])]]
    done = subprocess.run(check, env=env, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "noise floor 0.00 points" in done.stdout
    return root / "store"


def shards(store: Path, table: str) -> list[Path]:
    return sorted((store / table).glob("*.parquet"))


def test_the_store_has_every_table_and_skipped_settings(store):
    assert all(shards(store, table) for table in TABLES)
    settings = pd.read_parquet(store / "settings")
    assert sorted(settings.status.astype(str)) == ["complete"] * 4 + ["skipped"] * 2
    # a skipped setting's provenance is all null: the case that types a column by its values
    assert settings[settings.status == "skipped"].hostname.isna().all()


@pytest.mark.parametrize("table", list(TABLES))
def test_every_engine_reads_the_same_rows_and_columns(store, table):
    files = shards(store, table)
    expected_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    glob = f"{store}/{table}/*.parquet"
    frame = pd.read_parquet(store / table)
    con = duckdb.connect()
    relation = con.execute(f"SELECT * FROM read_parquet('{glob}')")
    duck_columns = [d[0] for d in relation.description]
    duck_rows = len(relation.fetchall())
    lazy = pl.scan_parquet(glob)
    assert len(frame) == duck_rows == lazy.select(pl.len()).collect().item() == expected_rows
    assert (
        list(frame.columns) == duck_columns == lazy.collect_schema().names() == TABLES[table].names
    )


@pytest.mark.parametrize("table", list(TABLES))
def test_every_shard_of_a_table_has_the_same_column_types(store, table):
    arrow = {str(f.name): pq.read_schema(f).remove_metadata() for f in shards(store, table)}
    assert all(s.equals(TABLES[table]) for s in arrow.values()), table
    con = duckdb.connect()
    duck = {
        name: con.execute(
            f"DESCRIBE SELECT * FROM read_parquet('{store}/{table}/{name}')"
        ).fetchall()
        for name in arrow
    }
    polars = {name: pl.read_parquet_schema(store / table / name) for name in arrow}
    assert len({tuple(types) for types in duck.values()}) == 1, table
    assert len({tuple(schema.items()) for schema in polars.values()}) == 1, table


def test_scores_have_the_same_values_in_every_engine(store):
    glob = f"{store}/scores/*.parquet"
    frame = pd.read_parquet(store / "scores").sort_values("setting_key")
    con = duckdb.connect()
    duck = con.execute(f"SELECT setting_key, pass_at_1 FROM '{glob}' ORDER BY setting_key")
    polars = pl.read_parquet(glob).sort("setting_key")
    expected = list(zip(frame.setting_key, frame.pass_at_1, strict=True))
    assert duck.fetchall() == expected
    assert list(zip(polars["setting_key"], polars["pass_at_1"], strict=True)) == expected


@pytest.mark.parametrize("table", ["settings", "scores"])
def test_hive_discovery_finds_no_partition_in_the_flat_layout(store, table):
    con = duckdb.connect()
    duck = con.execute(
        f"SELECT * FROM read_parquet('{store}/{table}/*.parquet', hive_partitioning = true)"
    )
    polars = pl.scan_parquet(store / table, hive_partitioning=True).collect_schema().names()
    arrow = ds.dataset(store / table, format="parquet", partitioning="hive").schema.names
    assert [d[0] for d in duck.description] == polars == arrow == TABLES[table].names


def test_a_hive_partitioned_copy_is_understood_by_every_engine(store, tmp_path):
    scores = pa.Table.from_pandas(pd.read_parquet(store / "scores"), preserve_index=False)
    ds.write_dataset(
        scores,
        tmp_path / "scores",
        format="parquet",
        partitioning=["precision", "template"],
        partitioning_flavor="hive",
    )
    assert sorted(p.name for p in (tmp_path / "scores").iterdir()) == [
        "precision=bf16",
        "precision=fp16",
    ]
    glob = f"{tmp_path}/scores/*/*/*.parquet"
    con = duckdb.connect()
    duck = con.execute(
        f"SELECT precision, template, count(*) FROM read_parquet('{glob}', "
        "hive_partitioning = true) GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    polars = (
        pl.scan_parquet(tmp_path / "scores", hive_partitioning=True)
        .group_by("precision", "template")
        .len()
        .sort("precision", "template")
        .collect()
    )
    frame = pd.read_parquet(tmp_path / "scores")
    counts = frame.groupby(["precision", "template"], observed=True).size()
    expected = [(p, t, n) for (p, t), n in sorted(counts.items())]
    assert duck == expected == [tuple(r) for r in polars.iter_rows()]
    assert len(expected) == 4 and sum(n for *_, n in expected) == len(scores)


def test_a_quarantine_folder_stays_out_of_a_table_glob(store, tmp_path):
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    shard = shards(copy, "scores")[0]
    moved = copy / "quarantine" / "scores" / "20250101T000000Z-abcd" / shard.name
    moved.parent.mkdir(parents=True)
    shutil.copy(shard, moved)
    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM '{copy}/scores/*.parquet'").fetchall()[0][0]
    assert n == len(pd.read_parquet(copy / "scores")) == len(pd.read_parquet(store / "scores"))


def test_the_readme_duckdb_query_runs(store):
    readme = (REPO_ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    snippet = next(b for b in blocks if "import duckdb" in b)
    assert len(snippet.strip().splitlines()) <= 3
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(snippet.replace("results/", f"{store}/"), {})  # noqa: S102 - the README's own code
    assert "deepseekcoder-1.3b-instruct" in out.getvalue()
    assert "33.3" in out.getvalue()


@pytest.fixture(scope="module")
def compacted(store, tmp_path_factory) -> Path:
    """A copy of the store, compacted as the end of a run leaves it."""
    from storage.compact import compact
    from storage.store import Store

    copy = tmp_path_factory.mktemp("compacted") / "store"
    shutil.copytree(store, copy)
    handle = Store(str(copy))
    with handle.writer_lock():
        compact(handle)
    return copy


@pytest.mark.parametrize("table", list(TABLES))
def test_every_engine_reads_a_compacted_table_as_before(store, compacted, table):
    """Packs are plain Parquet: DuckDB, polars, pyarrow and pandas read each compacted table
    folder with the same rows, columns and types as before, each row once."""
    assert len(shards(compacted, table)) <= len(shards(store, table))
    glob = f"{compacted}/{table}/*.parquet"
    con = duckdb.connect()
    duck = con.sql(f"SELECT * FROM read_parquet('{glob}')").to_arrow_table()
    polars = pl.scan_parquet(glob)
    frame = pd.read_parquet(compacted / table)
    arrow = ds.dataset(compacted / table, format="parquet").to_table()
    before = pd.read_parquet(store / table)
    assert len(duck) == polars.select(pl.len()).collect().item() == len(frame) == len(arrow)
    assert len(frame) == len(before)
    assert list(frame.columns) == polars.collect_schema().names() == TABLES[table].names
    assert arrow.schema.remove_metadata().equals(TABLES[table])
    key = "run_id" if table in ("runs", "repeat_checks") else "setting_key"
    assert sorted(frame[key]) == sorted(before[key])
    assert sorted(duck.column(key).to_pylist()) == sorted(before[key])


def test_the_readme_duckdb_query_runs_on_a_compacted_store(compacted):
    readme = (REPO_ROOT / "README.md").read_text()
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "duckdb" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(snippet.replace("results/", f"{compacted}/"), {})  # noqa: S102 - the README's code
    assert "33.3" in out.getvalue()
