"""The command line speaks one language: one way to name the store, `status` columns and
keys, `export-generations --all`, percent-only import logs, a clear error for a missing
tokenizer, problem selection by task id, replay files per cell, and one scale in the score
table. Everything runs the real commands (no Ray: `plan`, `status`, imports and exports)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.cli import main
from orchestrator.cli.common import normalize_store_args
from orchestrator.report.screens.scores import render_score_table, score_table
from storage.store import Store
from tests.fixtures_store import RUN_ID, Spec, write_canonical_store, write_setting
from tests.processes import lock_held_elsewhere
from tests.unit.orchestrator.run.preflight.hub_server import (
    cli_counting_connects,
    closed_port,
    hub_env,
)

ROOT = Path(__file__).resolve().parents[4]


def run_cli(args, capsys) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def weights(tmp_path) -> Path:
    """A local folder as the model's weights: `plan`'s weight check needs no network."""
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def _plan(capsys, *overrides) -> tuple[int, dict | None, str]:
    code, out, err = run_cli(["plan", "--json", *overrides], capsys)
    return code, (json.loads(out) if code == 0 else None), err


# -- one way to name the store ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "overrides", "expected"),
    [
        (["status", "store=S"], set(), ["status", "--store", "S"]),
        (["report", "--store", "S"], set(), ["report", "--store", "S"]),
        (["plan", "--store", "S", "model=tiny"], {"plan"}, ["plan", "model=tiny", "store=S"]),
        (["plan", "--store=S"], {"plan"}, ["plan", "store=S"]),
        (["-v", "verify", "store=S", "--json"], set(), ["-v", "verify", "--json", "--store", "S"]),
        (["plan", "model=tiny"], {"plan"}, ["plan", "model=tiny"]),
    ],
)
def test_both_store_forms_become_the_one_each_command_takes(argv, overrides, expected):
    assert normalize_store_args(argv, overrides) == expected


def test_two_different_stores_are_an_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["status", "store=a", "--store", "b"])
    assert info.value.code == 2
    assert "two stores named: a and b" in capsys.readouterr().err


@pytest.mark.parametrize("form", ["flag", "override"])
def test_every_store_command_accepts_both_forms(env, capsys, tmp_path, weights, form):
    root = tmp_path / "store"
    write_setting(Store(str(root)), Spec("tiny", "own", "greedy", 2048, "fp32", 80))
    named = ["--store", str(root)] if form == "flag" else [f"store={root}"]
    code, out, _ = run_cli(["status", *named, "--json"], capsys)
    assert code == 0 and json.loads(out)["store"] == str(root)
    assert json.loads(out)["totals"]["complete"] == 1
    code, out, _ = run_cli(["verify", *named, "--json"], capsys)
    assert code == 0 and json.loads(out)["store"] == str(root)
    code, out, _ = run_cli(["compact", *named, "--json"], capsys)
    assert code == 0 and json.loads(out)["store"] == str(root)
    code, out, _ = run_cli(["compare-backends", *named, "--json"], capsys)
    assert code == 0
    code, out, _ = run_cli(
        ["report", *named, "--format", "json", "--out", str(tmp_path / f"report-{form}")], capsys
    )
    assert code == 0 and (tmp_path / f"report-{form}" / "report.json").is_file()
    code, out, _ = run_cli(
        [
            "export",
            *named,
            "--format",
            "eee",
            "--out",
            str(tmp_path / f"eee-{form}"),
            "--no-literature",
        ],
        capsys,
    )
    assert code == 0
    code, data, _ = _plan(capsys, *named, "model=tiny", f"model.repo_id={weights}")
    assert code == 0 and data["store"] == str(root)


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["report"],
        ["verify"],
        ["compact"],
        ["export-generations", "--all", "--out", "x"],
        ["compare-backends"],
    ],
)
def test_a_missing_store_is_an_error_not_an_empty_answer(capsys, tmp_path, command):
    missing = tmp_path / "no-such-store"
    code, out, err = run_cli([*command, "--store", str(missing)], capsys)
    assert code == 2 and out == ""
    assert f"store {missing} does not exist" in err
    assert not missing.exists()  # nothing was created


# -- status ---------------------------------------------------------------------------------------


def _partial_and_generated_store(root: Path) -> dict[str, str]:
    """One complete setting, one with every generation but no executions, one with one chunk
    of two stored. Returns {status: key}."""
    store = Store(str(root))
    complete = write_setting(store, Spec("tiny", "own", "greedy", 2048, "fp32", 80))
    generated = write_setting(store, Spec("tiny", "own", "greedy", 512, "fp32", 80))
    for table in ("executions", "scores"):
        (root / table / f"{generated}.parquet").unlink()
    partial = write_setting(store, Spec("tiny", "own", "greedy", 512, "bf16", 80))
    for table in ("executions", "scores"):
        (root / table / f"{partial}.parquet").unlink()
    gens = store.read_shard("generations", partial)
    (root / "generations" / f"{partial}.parquet").unlink()
    store.write_table("generations", f"{partial}~00000", gens.slice(0, 100))
    for key in (generated, partial):
        [row] = store.read_shard("settings", key).to_pylist()
        store.write_rows("settings", key, [row | {"status": "running"}])
    return {"complete": complete, "generated": generated, "partial": partial}


def test_status_shows_generated_and_partial_columns_and_lists_keys(env, capsys, tmp_path):
    keys = _partial_and_generated_store(tmp_path)
    code, out, _ = run_cli(["status", f"store={tmp_path}", "--json"], capsys)
    data = json.loads(out)
    assert code == 0
    assert data["totals"] == {
        "complete": 1,
        "running": 0,
        "queued": 0,
        "generated": 1,
        "partial": 1,
        "failed": 0,
        "skipped": 0,
        "damaged": 0,
        "pending": 0,
    }
    assert data["partial"] == [
        {"setting_key": keys["partial"], "generated_samples": 100, "total_samples": 164}
    ]
    code, out, _ = run_cli(["status", f"store={tmp_path}", "--keys"], capsys)
    header = next(line for line in out.splitlines() if line.startswith("model"))
    assert header.split() == [
        "model",
        "engine",
        "complete",
        "running",
        "queued",
        "generated",
        "partial",
        "failed",
        "skipped",
        "damaged",
        "pending",
    ]
    listed = {line.split()[0]: line.split()[1] for line in out.splitlines()[-3:]}
    for status, key in keys.items():
        assert listed[key[:12]] == status
    assert f"partial {keys['partial'][:12]}: 100 of 164 samples generated" in out
    code, out, _ = run_cli(["status", f"store={tmp_path}"], capsys)
    assert keys["complete"] not in out  # full keys only with --keys


def test_status_of_a_live_run_counts_what_the_store_holds(env, capsys, tmp_path):
    keys = _partial_and_generated_store(tmp_path)
    store = Store(str(tmp_path))
    [run] = (
        store.read_shard("runs", RUN_ID).to_pylist() if store.read_shard("runs", RUN_ID) else [None]
    )
    assert run is None  # write_setting writes no run: this test writes the live one
    store.write_rows(
        "runs",
        "live",
        [
            {
                "run_id": "live",
                "started_at": pd.Timestamp.now(tz="UTC"),
                "command": "run",
                "overrides_json": "[]",
                "setting_keys": list(keys.values()),
                "status": "running",
                "n_generated": None,
                "n_executed": None,
            }
        ],
    )
    with lock_held_elsewhere(tmp_path):
        code, out, _ = run_cli(["status", f"store={tmp_path}", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["writer_active"] is True
    assert data["run"]["status"] == "running"
    assert (data["run"]["n_generated"], data["run"]["n_executed"]) == (2, 1)
    code, out, _ = run_cli(["status", f"store={tmp_path}", "--json"], capsys)
    run = json.loads(out)["run"]  # the writer is gone and the record still says running
    assert run["status"] == "interrupted" and run["n_generated"] == 2


# -- export-generations --all, import-generations -------------------------------------------------


@pytest.fixture
def data_env(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("REPROGRID_DATA_DIR", str(shared_data))
    monkeypatch.setenv("REPROGRID_CACHE_DIR", str(tmp_path / "cache"))


def test_export_all_writes_one_harness_file_per_setting(tmp_path, problem_set, capsys):
    root = tmp_path / "store"
    canonical = write_canonical_store(str(root), problem_set, n_problems=5, buggy=(3,))
    keys = _partial_and_generated_store(root)
    code, out, _ = run_cli(
        ["export-generations", f"store={root}", "--all", "--out", str(tmp_path / "files")], capsys
    )
    assert code == 0
    written = sorted(p.stem for p in (tmp_path / "files").glob("*.json") if p.stem != "index")
    # every setting whose generations are all stored; the partial one is not a whole file
    assert written == sorted([canonical, keys["complete"], keys["generated"]])
    index = json.loads((tmp_path / "files" / "index.json").read_text())
    assert sorted(e["setting_key"] for e in index) == written
    entry = next(e for e in index if e["setting_key"] == keys["complete"])
    assert entry["file"] == f"{keys['complete']}.json" and entry["problems"] == 164
    assert (entry["model_name"], entry["template"], entry["decoding"]) == ("tiny", "yi", "greedy")
    assert (entry["max_length"], entry["precision"], entry["backend"]) == (2048, "fp32", "hf")
    entries = json.loads((tmp_path / "files" / f"{canonical}.json").read_text())
    assert len(entries) == 5 and entries[0][0].startswith("from typing import List")
    assert len(json.loads((tmp_path / "files" / f"{keys['generated']}.json").read_text())) == 164
    assert len(out.strip().splitlines()) == 4 and "index.json" in out
    code, _, err = run_cli(
        [
            "export-generations",
            f"store={root}",
            "--setting",
            keys["partial"][:12],
            "--out",
            str(tmp_path / "p.json"),
        ],
        capsys,
    )
    assert code == 2 and "only 100 of 164 generations" in err


def test_export_of_chunked_generations_is_the_whole_setting(tmp_path, capsys):
    root = tmp_path / "store"
    store = Store(str(root))
    key = write_setting(store, Spec("tiny", "own", "greedy", 2048, "fp32", 80))
    whole = store.read_shard("generations", key)
    (root / "generations" / f"{key}.parquet").unlink()
    store.write_table("generations", f"{key}~00000", whole.slice(0, 100))
    store.write_table("generations", f"{key}~00001", whole.slice(100))
    out = tmp_path / "g.json"
    code, _, _ = run_cli(
        ["export-generations", "--store", str(root), "--setting", key[:12], "--out", str(out)],
        capsys,
    )
    assert code == 0 and len(json.loads(out.read_text())) == 164


def test_import_logs_the_score_as_a_percent_only(tmp_path, problem_set, data_env, capsys, caplog):
    root = tmp_path / "store"
    source = write_canonical_store(str(root), problem_set, n_problems=5, buggy=(3,))
    out = tmp_path / "generations.json"
    export = ["export-generations", "--store", str(root), "--setting", source[:12]]
    assert main([*export, "--out", str(out)]) == 0
    capsys.readouterr()
    with caplog.at_level("INFO"):
        code = main(
            [
                "import-generations",
                str(out),
                "--model",
                "tiny",
                f"store={root}",
                "--setting",
                "template=own",
                "dtype=fp32",
            ]
        )
    printed = capsys.readouterr().out
    assert code == 0
    assert "pass@1 80.00%" in printed and "0.8 " not in printed
    [logged] = [r.getMessage() for r in caplog.records if "imported" in r.getMessage()]
    assert logged.endswith("pass@1 80.00%") and "0.8" not in logged.replace("80.00", "")


# -- prompts without a tokenizer ------------------------------------------------------------------


def test_prompts_for_a_model_without_its_tokenizer_is_a_clear_error(env, tmp_path):
    # A Hub that cannot be reached (a closed port as HF_ENDPOINT) and an empty HF cache: the
    # tokenizer is absent. One probe finds the Hub unreachable; transformers then looks in the
    # cache only, instead of retrying each file it asks for.
    port = closed_port()
    cli_env = hub_env(os.environ, f"http://127.0.0.1:{port}", tmp_path / "hub", ROOT)
    args = ["prompts", "--template", "own", "--model", "deepseekcoder-1.3b-instruct"]
    done, connects = cli_counting_connects([*args, "--limit", "1"], cli_env, port, ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert connects == 1  # the probe; no request, no retry loop
    assert (
        "the tokenizer of model 'deepseekcoder-1.3b-instruct' (deepseek-ai/deepseek-coder-1.3b-"
        "instruct) is not available: not in the Hugging Face cache and the Hub "
        f"(http://127.0.0.1:{port}) cannot be reached"
    ) in done.stderr
    assert "Traceback" not in done.stderr and "Retrying" not in done.stderr


# -- problem selection ----------------------------------------------------------------------------


def test_problems_select_task_ids_as_one_keyed_selection(env, capsys, tmp_path, weights):
    base = ["model=tiny", f"model.repo_id={weights}", f"store={tmp_path}"]
    code, chosen, _ = _plan(capsys, *base, "benchmark.problems=Python/7,Python/0")
    assert code == 0
    assert chosen["n_settings"] == 1 and chosen["generations"] == 2
    code, same, _ = _plan(capsys, *base, "benchmark.problems=Python/0,Python/7")
    code, whole, _ = _plan(capsys, *base)
    key = chosen["engines"][0]["settings"][0]["setting_key"]
    assert same["engines"][0]["settings"][0]["setting_key"] == key  # order does not matter
    assert whole["engines"][0]["settings"][0]["setting_key"] != key  # the selection is keyed
    code, cut, _ = _plan(
        capsys, *base, "benchmark.problems=Python/0,Python/7,Python/9", "benchmark.limit=2"
    )
    assert cut["generations"] == 2
    code, out, _ = run_cli(
        ["prompts", "--template", "instruct", "benchmark.problems=Python/7,Python/0"], capsys
    )
    assert [json.loads(line)["task_id"] for line in out.splitlines()] == ["Python/0", "Python/7"]


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("Python/0,Python/1000", "Unknown task id 'Python/1000' in benchmark.problems"),
        ("Python/0,Pyhton/7", "Did you mean: Python/7?"),
        ("Python/0,Python/0", "names Python/0 more than once"),
        ("Python/0,,Python/1", "expected task ids"),
    ],
)
def test_bad_problem_selections_are_errors(env, capsys, tmp_path, weights, value, needle):
    code, _, err = _plan(
        capsys,
        "model=tiny",
        f"model.repo_id={weights}",
        f"store={tmp_path}",
        f"benchmark.problems={value}",
    )
    assert code == 2 and needle in err


def test_a_selection_is_stored_and_scored_with_its_problems(
    tmp_path, problem_set, data_env, capsys
):
    """An import over two named problems: the settings and scores rows carry the selection,
    the score table shows it beside n_problems, on the stored scale (a fraction)."""
    from workers.benchmarks.humanevalfix.adapter import reference_samples
    from workers.spec import Variant

    refs = {r.task_id: r.program for r in reference_samples(problem_set, Variant.TESTS, False)}
    path = tmp_path / "two.json"
    path.write_text(json.dumps([[refs["Python/0"]], ["def broken(:\n"]]))
    root = tmp_path / "store"
    code, out, _ = run_cli(
        [
            "import-generations",
            str(path),
            "--model",
            "tiny",
            "--json",
            f"store={root}",
            "--setting",
            "template=own",
            "dtype=fp32",
            "benchmark.problems=Python/7,Python/0",
        ],
        capsys,
    )
    assert code == 0
    key = json.loads(out)["setting_key"]
    store = Store(str(root))
    [setting] = store.read_shard("settings", key).to_pylist()
    assert (setting["problems"], setting["n_problems"], setting["benchmark_n_problems"]) == (
        "Python/0,Python/7",
        2,
        164,
    )
    assert json.loads(setting["setting_json"])["problems"] == ["Python/0", "Python/7"]
    [score] = store.read_shard("scores", key).to_pylist()
    assert (score["value"], score["n_problems"], score["problems"]) == (0.5, 2, "Python/0,Python/7")
    gens = store.read_shard("generations", key).to_pylist()
    assert [g["task_id"] for g in gens] == ["Python/0", "Python/7"]
    [row] = score_table(str(root), [key])
    assert row["value"] == 0.5 and row["selection"] == "Python/0,Python/7"
    table = render_score_table([row])
    # one scale: percent, as the report and import-generations print it, said in the header
    assert "score %" in table.splitlines()[0]
    assert "50.00" in table and "0.5000" not in table and "Python/0,Python/7" in table
    assert key[:12] in table and row["score_pct"] == 50.0


# -- replay files per cell ------------------------------------------------------------------------


def test_replay_path_pattern_names_one_file_per_variant_and_template(
    env, capsys, tmp_path, weights
):
    for variant in ("tests", "docs"):
        for template in ("own", "instruct"):
            line = {"task_id": "Python/0", "sample_index": 0, "continuation": variant + template}
            (tmp_path / f"{variant}-{template}.jsonl").write_text(json.dumps(line) + "\n")
    pattern = f"replay_path={tmp_path}/{{variant}}-{{template}}.jsonl"
    base = [
        "model=tiny",
        f"model.repo_id={weights}",
        f"store={tmp_path / 'store'}",
        "backend=replay",
        "variant=tests,docs",
        "template=own,instruct",
    ]
    code, data, err = _plan(capsys, *base, pattern)
    assert code == 0, err
    settings = [s for e in data["engines"] for s in e["settings"]]
    assert data["n_settings"] == 4 and len({s["setting_key"] for s in settings}) == 4
    assert data["counts"]["skip"] == 0
    files = {e["backend_options"]["path"] for e in data["engines"]}
    assert files == {
        str(tmp_path / f"{v}-{t}.jsonl") for v in ("tests", "docs") for t in ("own", "instruct")
    }
    (tmp_path / "docs-own.jsonl").unlink()
    code, _, err = _plan(capsys, *base, pattern)
    assert code == 2 and f"no file {tmp_path}/docs-own.jsonl" in err
    code, _, err = _plan(capsys, *base, f"replay_path={tmp_path}/{{varaint}}.jsonl")
    assert code == 2 and "Unknown replay_path placeholder 'varaint'" in err
    assert "Did you mean: variant?" in err
