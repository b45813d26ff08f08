"""A folder that is not a store is an error for every command that reads one (exit 2), naming
the stores found inside it: after `make demo`, the default `results` holds the store
`results/demo` and is not one itself (storage/presence.py). A command that creates a store
refuses a file, and a folder that holds stores."""

from __future__ import annotations

import json

import pytest

from orchestrator.cli import main
from tests.fixtures_store import write_view_store

READERS = [
    ["status"],
    ["report", "--out", "the-report"],
    ["compare", "template=own", "template=instruct"],
    ["show", "--setting", "a", "--problem", "Python/0"],
    ["view", "--out", "the-view"],
    ["verify"],
    ["export", "--format", "eee", "--out", "the-export", "--no-literature"],
    ["export-generations", "--all", "--out", "the-export"],
    ["compact"],
    ["compare-backends"],
    ["repeat-check", "--setting", "a"],
]


@pytest.fixture
def results(tmp_path, monkeypatch):
    """`results` (the default store) holding the store `results/demo` and a file of notes."""
    monkeypatch.chdir(tmp_path)
    write_view_store("results/demo")
    (tmp_path / "results" / "notes.txt").write_text("the demo's store is results/demo\n")
    return tmp_path


def cli(command: list[str], capsys, store: list[str]) -> tuple[int, str, str]:
    code = main([*command, *store])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_a_folder_holding_a_store_is_not_one_and_names_it(results, capsys, command):
    listed = sorted(p.relative_to(results) for p in results.rglob("*"))
    code, out, err = cli(command, capsys, ["--store", "results"])
    assert code == 2 and out == "", err
    assert "results is not a store; it holds results/demo (pass --store results/demo" in err
    assert sorted(p.relative_to(results) for p in results.rglob("*")) == listed  # nothing written


@pytest.mark.parametrize("command", [["status"], ["report"], ["view"]], ids=lambda c: c[0])
def test_the_default_store_is_checked_too(results, capsys, command):
    code, out, err = cli(command, capsys, [])
    assert code == 2 and out == ""
    assert "results is not a store; it holds results/demo" in err
    assert not (results / "results-report").exists()


def test_the_store_inside_answers(results, capsys):
    code, out, _ = cli(["status", "--json"], capsys, ["--store", "results/demo"])
    assert code == 0 and '"totals"' in out


@pytest.mark.parametrize("command", READERS[:3], ids=lambda c: c[0])
def test_an_empty_folder_and_a_file_are_not_stores(tmp_path, capsys, command):
    (tmp_path / "empty").mkdir()
    code, out, err = cli(command, capsys, ["--store", str(tmp_path / "empty")])
    assert code == 2 and out == ""
    assert f"{tmp_path / 'empty'} is not a store: an empty folder" in err
    (tmp_path / "file").write_text("x")
    code, out, err = cli(command, capsys, ["--store", str(tmp_path / "file")])
    assert code == 2 and out == ""
    assert f"store {tmp_path / 'file'} is a file, not a store's folder" in err


def test_plan_into_a_folder_that_holds_a_store_is_refused(results, env, capsys):
    code, out, err = cli(["plan", "model=tiny", "benchmark.limit=1"], capsys, [])
    assert code == 2 and out == ""
    assert "results is not a store; it holds results/demo" in err


@pytest.mark.parametrize("made", ["missing", "empty", "other files"])
def test_plan_into_a_new_empty_or_unrelated_folder_is_allowed(tmp_path, env, capsys, made):
    target = tmp_path / "new"
    if made != "missing":
        target.mkdir()
    if made == "other files":
        (target / "README.txt").write_text("our results go here\n")
    weights = tmp_path / "weights"  # a local folder: the weights check needs no network
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    overrides = ["model=tiny", f"model.repo_id={weights}", "benchmark.limit=1", f"store={target}"]
    code, out, err = cli(["plan", "--json", *overrides], capsys, [])
    assert code == 0, err
    assert json.loads(out)["store"] == str(target)


def test_an_import_into_a_folder_that_holds_a_store_is_refused(results, env, capsys):
    harness_file = results / "generations.json"
    harness_file.write_text(json.dumps([["def has_close_elements(numbers, threshold):\n"]]))
    command = ["import-generations", str(harness_file), "--model", "tiny", "benchmark.limit=1"]
    code, out, err = cli(command, capsys, ["store=results"])
    assert code == 2 and out == ""
    assert "results is not a store; it holds results/demo" in err
    assert sorted(p.name for p in (results / "results").iterdir()) == ["demo", "notes.txt"]


@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_store_that_is_a_file_is_named_and_exit_2(env, capsys, tmp_path, command):
    file = tmp_path / "store.parquet"
    file.write_bytes(b"not a folder")
    code, _, err = cli([command, "model=tiny", "benchmark.limit=1"], capsys, [f"store={file}"])
    assert code == 2 and f"store {file} is a file, not a store's folder" in err
    assert file.read_bytes() == b"not a folder"
