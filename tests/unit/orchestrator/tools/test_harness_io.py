"""BigCode harness generations.json: export, read checks, and the export -> import round trip
through the real sandbox (5 problems, canonical fixes and one buggy program)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from orchestrator.cli import main
from orchestrator.tools.harness_io import (
    HarnessFileError,
    at_limit_entries,
    export_entries,
    harness_entry,
    read_generations_json,
    resolve_setting_key,
    write_generations_json,
)
from storage.store import Store
from tests.fixtures_store import write_canonical_store


def _gen(key: str, task: str, index: int, program: str, truncated: bool = False) -> dict:
    return {
        "setting_key": key,
        "task_id": task,
        "sample_index": index,
        "prompt": "",
        "continuation": "",
        "program": program,
        "prompt_truncated": truncated,
    }


def test_export_is_one_list_per_problem_in_dataset_order(tmp_path):
    store = Store(str(tmp_path))
    key = "a" * 64
    rows = [_gen(key, f"Python/{t}", s, f"p{t}s{s}") for t in (10, 2, 9) for s in (1, 0)]
    store.write_rows("settings", key, [{"setting_key": key, "status": "complete"}])
    store.write_rows("generations", key, rows)
    entries = export_entries(store, key)
    assert entries == [["p2s0", "p2s1"], ["p9s0", "p9s1"], ["p10s0", "p10s1"]]
    path = write_generations_json(entries, tmp_path / "out" / "generations.json")
    assert path.read_text() == json.dumps(entries)  # plain json.dump: ASCII, no indent
    assert read_generations_json(path) == entries
    assert resolve_setting_key(store, "aaaa") == key


def test_export_of_a_missing_setting_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="no generations for setting"):
        export_entries(Store(str(tmp_path)), "b" * 64)
    with pytest.raises(FileNotFoundError, match="no setting"):
        resolve_setting_key(Store(str(tmp_path)), "b")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{}", "non-empty JSON list"),
        ("[]", "non-empty JSON list"),
        ('["x"]', "entry 0 is not a non-empty list"),
        ("[[]]", "entry 0 is not a non-empty list"),
        ('[["a"], ["b", 3]]', "entry 1, candidate 1 is not a string"),
        ("[[", "not JSON"),
    ],
)
def test_bad_harness_files(tmp_path, content, fragment):
    path = tmp_path / "g.json"
    path.write_text(content)
    with pytest.raises(HarnessFileError, match=None) as info:
        read_generations_json(path)
    assert fragment in str(info.value)


def test_a_prompt_at_the_limit_keeps_one_generation_per_call_in_the_harness_file(tmp_path):
    """The harness zips the B task-id copies of a call with its 1-row input when the prompt is
    at the limit: ceil(n / B) candidates. The store keeps n; export writes the harness's."""
    store = Store(str(tmp_path))
    key = "d" * 64
    settings = {"setting_key": key, "status": "complete", "length_semantics": "total"}
    store.write_rows("settings", key, [settings | {"samples_per_call": 2}])
    rows = [_gen(key, "Python/0", s, "header", truncated=True) for s in range(5)]
    rows += [_gen(key, "Python/1", s, f"p{s}") for s in range(5)]
    store.write_rows("generations", key, rows)
    assert export_entries(store, key) == [["header"] * 3, [f"p{s}" for s in range(5)]]
    store.write_rows("settings", key, [settings | {"samples_per_call": 1}])
    assert export_entries(store, key) == [["header"] * 5, [f"p{s}" for s in range(5)]]
    new_tokens = settings | {"samples_per_call": 2, "length_semantics": "new_tokens"}
    store.write_rows("settings", key, [new_tokens])  # generated from: nothing to collapse
    assert [len(e) for e in export_entries(store, key)] == [5, 5]
    assert harness_entry([(0, "a", True), (1, "a", True)], 5) == ["a"]
    assert harness_entry([(0, "a", True), (1, "b", False)], 5) == ["a", "b"]


@pytest.mark.parametrize(
    ("entries", "per_call", "expected"),
    [
        ([["a", "b"], ["c", "d"]], 1, set()),
        ([["a", "b", "c", "d", "e"], ["x"]], 5, {1}),
        ([["x", "x"], ["a", "b", "c", "d"], ["y", "y"]], 2, {0, 2}),
        ([["a", "b"], ["c"]], 1, "entry 1 holds 1 samples, others 2"),
        ([["a", "b", "c", "d"], ["x", "y"]], 2, "identical copies only for a prompt"),
        ([["a", "b", "c", "d"], ["x"]], 2, "2 with samples_per_call=2"),
    ],
)
def test_at_limit_entries(entries, per_call, expected):
    if isinstance(expected, str):
        with pytest.raises(HarnessFileError, match=expected):
            at_limit_entries(entries, per_call, "g.json")
    else:
        assert at_limit_entries(entries, per_call, "g.json") == expected


@pytest.fixture
def data_env(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("REPROGRID_DATA_DIR", str(shared_data))
    monkeypatch.setenv("REPROGRID_CACHE_DIR", str(tmp_path / "cache"))


def test_round_trip_through_the_sandbox_gives_the_same_pass1(
    tmp_path, problem_set, data_env, capsys
):
    root = tmp_path / "store"
    source = write_canonical_store(str(root), problem_set, n_problems=5, buggy=(3,))
    out = tmp_path / "generations.json"
    export = ["export-generations", "--store", str(root), "--setting", source[:12]]
    assert main([*export, "--out", str(out)]) == 0
    entries = json.loads(out.read_text())
    assert len(entries) == 5 and all(len(e) == 1 for e in entries)
    assert entries[0][0].startswith("from typing import List\n\n\ndef has_close_elements")

    args = [
        "import-generations",
        str(out),
        "--model",
        "tiny",
        "--store",
        str(root),
        "--json",
        "--setting",
        "template=own",
        "decoding=greedy",
        "max_length=2048",
        "dtype=fp32",
    ]
    capsys.readouterr()
    assert main(args) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["pass_at_1"] == pytest.approx(0.8) and outcome["n_passed"] == 4
    key = outcome["setting_key"]
    assert key != source

    store = Store(str(root))
    scores = pd.read_parquet(root / "scores").set_index("setting_key")
    assert scores.loc[key, "pass_at_1"] == scores.loc[source, "pass_at_1"] == pytest.approx(0.8)
    [setting] = store.read_shard("settings", key).to_pylist()
    assert (setting["status"], setting["backend"], setting["limit"]) == ("complete", "replay", 5)
    assert setting["template"] == "yi" and setting["model_name"] == "tiny"
    assert (
        json.loads(setting["setting_json"])["engine"]["replay_sha256"] == outcome["replay_sha256"]
    )
    gens = store.read_shard("generations", key).to_pylist()
    assert [g["program"] for g in gens] == [e[0] for e in entries]
    assert {g["continuation"] for g in gens} == {""}
    execs = store.read_shard("executions", key).to_pylist()
    assert [e["passed"] for e in execs] == [True, True, True, False, True]
    runs = pd.read_parquet(root / "runs")
    assert "import-generations" in set(runs.command)

    # Importing the same file again rewrites the same setting (same key, no duplicates).
    capsys.readouterr()
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["setting_key"] == key
    assert len(store.read_table("executions", [key])) == 5


def test_import_refuses_a_sweep_and_a_limit_mismatch(tmp_path, data_env, capsys):
    path = tmp_path / "g.json"
    write_generations_json([["def f():\n    pass\n"]] * 3, path)
    store = ["--store", str(tmp_path / "s")]
    assert (
        main(
            [
                "import-generations",
                str(path),
                "--model",
                "tiny",
                *store,
                "--setting",
                "template=own,instruct",
            ]
        )
        == 2
    )
    assert "scores one setting" in capsys.readouterr().err
    assert (
        main(["import-generations", str(path), "benchmark.limit=4", "--model", "tiny", *store]) == 2
    )
    assert "the file has 3 problems but the setting selects 4" in capsys.readouterr().err
    assert main(["import-generations", str(path), "--model", "nonexistent", *store]) == 2
    assert "Unknown model" in capsys.readouterr().err
    # the backend a file claims is one backend that generates
    claim = ["import-generations", str(path), "--model", "tiny", *store, "--setting"]
    assert main([*claim, "backend=auto"]) == 2
    assert "backend=auto is not a backend a file was generated with" in capsys.readouterr().err
    assert main([*claim, "backend=hf,vllm"]) == 2
    assert "name one backend, not a sweep" in capsys.readouterr().err
    # a shorter entry that is not the harness's at-limit shape names the way out
    write_generations_json([["a", "b"], ["c"], ["d", "e"]], path)
    assert main([*claim, "decoding=t0.8"]) == 2
    err = capsys.readouterr().err
    assert "entry 1 holds 1 samples, others 2" in err and "samples_per_call" in err
