"""A harness file out and back in, on the real transformers path (tiny model): the export is the
harness's own shape (a prompt at the length limit keeps one generation per generate call), the
import records the backend it claims and lines up with the run it reproduces (compare-backends
pairs them sample by sample; the report puts them in one column), and the file is named."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from orchestrator.cli import main
from orchestrator.cli.report import card_from_registry

# Python/0's prompt is 530 tiny-tokenizer tokens under `instruct`: over the 512 limit, so it is
# not generated from; Python/1 (482) is. Five samples in one generate call (--batch_size 5).
SETTING = [
    "template=instruct",
    "decoding=t0.8",
    "n_samples=5",
    "samples_per_call=5",
    "max_length=512",
    "dtype=fp32",
]


def cli_json(capsys, command, *args) -> dict:
    assert main([command, "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_export_import_and_compare_a_run_with_a_prompt_at_the_limit(env, capsys, tmp_path):
    store = tmp_path / "store"
    run = cli_json(
        capsys, "run", "model=tiny", "benchmark.limit=2", "backend=hf", *SETTING, f"store={store}"
    )
    [generated] = run["settings"]
    key = generated["setting_key"]
    gens = [
        g for g in pq.read_table(store / "generations").to_pylist() if g["task_id"] == "Python/0"
    ]
    assert len(gens) == 5 and all(g["prompt_truncated"] for g in gens)  # the store keeps 5
    assert len({g["program"] for g in gens}) == 1

    out = tmp_path / "generations_humanevalfixtests-python.json"
    assert (
        main(["export-generations", f"store={store}", "--setting", key[:12], "--out", str(out)])
        == 0
    )
    assert "2 problems x 5 samples" in capsys.readouterr().out
    entries = json.loads(out.read_text())
    assert [len(e) for e in entries] == [1, 5]  # the harness's file: one generation per call
    assert entries[0][0] == gens[0]["program"]

    imported = cli_json(
        capsys,
        "import-generations",
        str(out),
        "--model",
        "tiny",
        f"store={store}",
        "--setting",
        *SETTING,
    )
    assert imported["claimed_backend"] == "hf" and imported["file"] == str(out)
    assert imported["pass_at_1"] == pytest.approx(generated["value"])
    ikey = imported["setting_key"]
    [row] = pq.read_table(store / "settings", filters=[("setting_key", "=", ikey)]).to_pylist()
    assert (row["backend"], row["claimed_backend"]) == ("replay", "hf")  # replay: provenance
    assert json.loads(row["engine_options_json"])["file"] == str(out)
    [run_row] = [r for r in pq.read_table(store / "runs").to_pylist() if ikey in r["setting_keys"]]
    assert json.loads(run_row["data_sources_json"])[out.name]["source"] == str(out)
    igens = [
        g for g in pq.read_table(store / "generations").to_pylist() if g["setting_key"] == ikey
    ]
    at_limit = [g for g in igens if g["task_id"] == "Python/0"]
    assert len(at_limit) == 5 and all(g["prompt_truncated"] for g in at_limit)  # n copies again

    again = tmp_path / "again.json"
    assert (
        main(["export-generations", f"store={store}", "--setting", ikey, "--out", str(again)]) == 0
    )
    assert again.read_bytes() == out.read_bytes()  # the round trip is exact
    capsys.readouterr()

    compared = cli_json(capsys, "compare-backends", "--store", str(store))
    assert (compared["n_pairs"], compared["n_unpaired"]) == (1, 0)
    [pair] = compared["pairs"]
    assert (pair["setting_key_a"], pair["setting_key_b"]) == (key, ikey)
    assert (pair["backend_a"], pair["backend_b"], pair["claimed_backend_b"]) == (
        "hf",
        "replay",
        "hf",
    )
    assert pair["n_samples"] == 10 and pair["identical_programs"] == pair["same_outcome"] == 1.0
    assert main(["compare-backends", "--store", str(store)]) == 0
    assert "hf/replay(hf)" in capsys.readouterr().out

    from orchestrator.report.tables.build import build_report
    from orchestrator.report.tables.data import ReportOptions

    report = build_report(str(store), ReportOptions(card_of=card_from_registry, n_resamples=200))
    grid = report.table("grid").set_index("setting_key")
    assert grid.loc[ikey, "backend"] == "hf" and grid.loc[ikey, "generated_by"] == "replay"
    pivot = report.table("scores_pivot")
    assert "fp32" in pivot.columns and not [c for c in pivot.columns if "replay" in str(c)]

    # Another claim is a label of the same file: the same setting, now paired with no run.
    claims_vllm = cli_json(
        capsys,
        "import-generations",
        str(out),
        "--model",
        "tiny",
        f"store={store}",
        "--setting",
        *SETTING,
        "backend=vllm",
    )
    assert claims_vllm["setting_key"] == ikey and claims_vllm["claimed_backend"] == "vllm"
    compared = cli_json(capsys, "compare-backends", "--store", str(store))
    assert (compared["n_pairs"], compared["n_unpaired"]) == (0, 2)
