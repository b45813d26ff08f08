"""Flags and overrides mix in any order for every command, `-v` works after the subcommand,
an unknown flag gets a did-you-mean and the subcommand's usage, `prompts` takes its options as
overrides and renders diff templates, and temperatures outside their range are errors (issue 22,
§2). No Ray: parsing, `plan`, `status` and `prompts` only."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.cli.common import normalize_store_args
from orchestrator.cli.main import _override_commands, build_parser, parse
from storage.store import Store
from tests.conftest import read_jsonl
from tests.fixtures_store import Spec, write_setting


def parsed(argv: list[str]):
    parser = build_parser()
    return parse(parser, normalize_store_args(argv, _override_commands(parser)))


@pytest.fixture
def weights(tmp_path) -> Path:
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


@pytest.mark.parametrize(
    ("argv", "overrides", "flags"),
    [
        (["run", "model=tiny", "store=D", "--retry-failed"], ["model=tiny", "store=D"], {}),
        (["run", "--retry-failed", "model=tiny", "--store", "D"], ["model=tiny", "store=D"], {}),
        (["run", "model=tiny", "--wait-lock", "5", "template=own"], ["model=tiny", "template=own"],
         {"wait_lock": 5.0}),
        (["plan", "grid=paper60", "model=tiny", "--store", "D", "--json"],
         ["grid=paper60", "model=tiny", "store=D"], {"json": True}),
        (["plan", "grid=paper60", "--json", "model=tiny"], ["grid=paper60", "model=tiny"],
         {"json": True}),
        (["doctor", "--json", "model=tiny"], ["model=tiny"], {"json": True}),
        (["check-references", "--variant", "docs", "benchmark.limit=3", "--json"],
         ["benchmark.limit=3"], {"variant": "docs", "json": True}),
    ],
)  # fmt: skip
def test_flags_and_overrides_mix_in_any_order(argv, overrides, flags):
    args = parsed(argv)
    assert args.overrides == overrides
    for name, value in flags.items():
        assert getattr(args, name) == value
    if argv[0] == "run":
        assert args.retry_failed == ("--retry-failed" in argv)


def test_import_generations_takes_overrides_after_its_flags():
    args = parsed(["import-generations", "gens.json", "--model", "tiny", "benchmark.limit=5"])
    assert args.inputs == ["gens.json", "benchmark.limit=5"] and args.model == "tiny"
    args = parsed(["import-generations", "--model", "tiny", "gens.json", "--store", "S"])
    assert args.inputs == ["gens.json"] and args.store == "S"


@pytest.mark.parametrize(
    "argv",
    [["-v", "status", "--store", "S"], ["status", "-v", "--store", "S"], ["status", "--store", "S",
     "--verbose"]],
)  # fmt: skip
def test_verbose_before_or_after_the_subcommand(argv):
    args = parsed(argv)
    assert args.verbose and args.command == "status" and args.store == "S"
    assert not parsed(["status", "--store", "S"]).verbose


def test_plan_runs_with_flags_between_overrides(env, capsys, tmp_path, weights):
    store = tmp_path / "store"
    forms = [
        ["plan", "grid=paper60", "model=tiny", f"model.repo_id={weights}", "--store", str(store),
         "--json"],
        ["plan", "grid=paper60", "--json", "model=tiny", f"model.repo_id={weights}",
         f"store={store}"],
    ]  # fmt: skip
    for argv in forms:
        assert main(argv) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["n_settings"] == 60 and data["store"] == str(store)


def test_an_unknown_flag_gets_a_did_you_mean_and_the_subcommand_usage(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "model=tiny", "--retry-faild"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: reprogrid run ")
    assert "unrecognized arguments: --retry-faild. Did you mean --retry-failed?" in err
    assert "model=tiny" not in err.splitlines()[-1]  # the override the typo stranded is not blamed


def test_overrides_given_to_a_command_without_them_are_named(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["status", "model=tiny", "--store", str(tmp_path)])
    err = capsys.readouterr().err
    assert err.startswith("usage: reprogrid status ")
    assert "`reprogrid status` takes no KEY=VALUE overrides (model=tiny)" in err


def test_an_unknown_command_and_choice_get_a_did_you_mean(capsys):
    with pytest.raises(SystemExit):
        main(["rnu", "model=tiny"])
    assert "Did you mean: run?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["prompts", "--format", "jsn", "--template", "instruct"])
    assert "Did you mean: jsonl?" in capsys.readouterr().err


def test_status_with_verbose_after_the_subcommand_runs(env, capsys, tmp_path):
    write_setting(Store(str(tmp_path)), Spec("tiny", "own", "greedy", 2048, "fp32", 80))
    assert main(["status", "--store", str(tmp_path), "-v", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["complete"] == 1


def _golden(shared_data: Path, variant: str, template: str) -> dict[str, str]:
    return {
        r["task_id"]: r["sha256_utf8"]
        for r in read_jsonl(shared_data / "humanevalfix-golden-prompts.jsonl")
        if r["task"] == f"humanevalfix{variant}-python" and r["prompt_option"] == template
    }


def _hashes(out: str) -> dict[str, str]:
    rows = [json.loads(line) for line in out.splitlines()]
    return {r["task_id"]: hashlib.sha256(r["prompt"].encode()).hexdigest() for r in rows}


def test_prompts_takes_template_and_variant_as_overrides(env, capsys, shared_data):
    assert main(["prompts", "template=deepseek", "variant=docs", "--limit", "5"]) == 0
    got = _hashes(capsys.readouterr().out)
    golden = _golden(shared_data, "docs", "deepseek")
    assert len(got) == 5 and all(got[t] == golden[t] for t in got)
    assert main(["prompts", "--template", "deepseek", "--variant", "docs", "--limit", "5"]) == 0
    assert _hashes(capsys.readouterr().out) == got


def test_prompts_names_a_missing_or_doubled_template(env, capsys):
    assert main(["prompts", "--limit", "1"]) == 2
    assert "--template T or template=T" in capsys.readouterr().err
    assert main(["prompts", "--template", "yi", "template=deepseek"]) == 2
    assert "template given twice: 'yi' and 'deepseek'" in capsys.readouterr().err


@pytest.mark.parametrize("template", ["diff", "diff-carper"])
def test_prompts_renders_diff_templates_as_the_harness_does(env, capsys, shared_data, template):
    assert main(["prompts", "--template", template]) == 0
    got = _hashes(capsys.readouterr().out)
    assert got == _golden(shared_data, "tests", template) and len(got) == 164


@pytest.mark.parametrize(
    ("decoding", "message"),
    [
        ("t9", "temperature must be a number > 0 and <= 2, got 9. Did you mean: t0.9?"),
        ("t100", "temperature must be a number > 0 and <= 2, got 100.0"),
        ("t2.5", "temperature must be a number > 0 and <= 2, got 2.5"),
        ("t0", "temperature 0 is greedy decoding; use decoding=greedy"),
        ("t0.0", "temperature 0 is greedy decoding; use decoding=greedy"),
        ("greedy,t-1", "temperature must be a number > 0 and <= 2, got -1.0"),
    ],
)
def test_temperatures_outside_their_range_are_errors(env, capsys, tmp_path, decoding, message):
    code = main(["plan", "model=tiny", f"decoding={decoding}", f"store={tmp_path}"])
    assert code == 2
    assert message in capsys.readouterr().err


def test_temperatures_inside_the_range_plan(env, capsys, tmp_path, weights):
    argv = ["plan", "--json", "model=tiny", f"model.repo_id={weights}", "decoding=t0.5,t2"]
    assert main([*argv, f"store={tmp_path}"]) == 0
    assert json.loads(capsys.readouterr().out)["n_settings"] == 2
