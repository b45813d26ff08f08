"""The CLI surface without Ray: plan, prompts, status, errors."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.run.config.overrides import GROUPS
from tests.conftest import read_jsonl
from tests.processes import lock_held_elsewhere


def run_cli(args, capsys) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_plan_paper60_json(env, capsys, tmp_path):
    weights = tmp_path / "weights"  # a local folder: the weights check needs no network
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    args = ["plan", "--json", "grid=paper60", "model=codellama-7b-base"]
    args += [f"model.repo_id={weights}", f"store={tmp_path / 'store'}"]
    code, out, _ = run_cli(args, capsys)
    assert code == 0
    data = json.loads(out)
    assert data["n_settings"] == 60 and data["n_keys"] == 60
    assert data["engine_loads"] == 5 and len(data["engines"]) == 5
    assert data["counts"]["generate"] == 60
    assert data["generations"] == 60 * 164
    # nothing measured in an empty store: the cost model estimates every engine
    assert data["estimate_basis"] == "model" and data["estimated_gpu_hours"] > 0
    templates = {s["template"] for e in data["engines"] for s in e["settings"]}
    assert templates == {"codellama", "instruct"}


def test_plan_shows_vllm_int8_as_skipped_with_reason(env, capsys, tmp_path):
    code, out, _ = run_cli(
        [
            "plan",
            "model=tiny",
            "grid=paper60",
            "backend=vllm",
            "seed_policy=per_sample",
            f"store={tmp_path}",
        ],
        capsys,
    )
    assert code == 0
    assert "24 skipped" in out  # 12 int8 + 12 int4 (the harness's fp4; vLLM's 4-bit is nf4)
    assert "8-bit needs a pre-quantized checkpoint" in out
    assert "the harness's fp4" in out


def test_prompts_jsonl_is_the_golden_text(env, capsys, shared_data):
    golden = {
        r["task_id"]: r["sha256_utf8"]
        for r in read_jsonl(shared_data / "humanevalfix-golden-prompts.jsonl")
        if r["task"] == "humanevalfixdocs-python" and r["prompt_option"] == "deepseek"
    }
    code, out, _ = run_cli(["prompts", "--variant", "docs", "--template", "deepseek"], capsys)
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 164
    for line in lines:
        assert hashlib.sha256(line["prompt"].encode()).hexdigest() == golden[line["task_id"]]


def test_prompts_with_a_model_count_tokens_and_render_chat(env, capsys):
    code, out, _ = run_cli(
        ["prompts", "--template", "chat", "--model", "tiny", "--limit", "2"], capsys
    )
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2 and all(r["n_prompt_tokens"] > 100 for r in rows)
    assert rows[0]["prompt"].startswith("<|im_start|>user\nFix bugs in has_close_elements.\n")
    assert rows[0]["prompt"].endswith(
        "<|im_start|>assistant\nfrom typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:"
    )
    code, out, _ = run_cli(
        ["prompts", "--template", "own", "--model", "tiny", "--limit", "1"], capsys
    )
    assert json.loads(out)["prompt"].startswith("<|im_start|>user\nFix bugs in")  # yi = ChatML


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["plan", "template=edit"], "Unknown template 'edit'"),
        (["plan", "model=llama"], "Unknown model 'llama'"),
        (["prompts", "--template", "continue"], "only for HumanEvalSynthesize"),
        (["status", "--store", "tests/fixtures/store_v5_chunks", "--run", "x"], "unknown run 'x'"),
        (["status", "--store", "/nonexistent/store"], "store /nonexistent/store does not exist"),
    ],
)
def test_errors_exit_2_with_the_bad_value(env, capsys, args, needle):
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert needle in err


def test_status_of_a_store_that_holds_nothing_yet(env, capsys, tmp_path):
    (tmp_path / "settings").mkdir()  # a store's table folder, empty
    code, out, _ = run_cli(["status", "--store", str(tmp_path), "--json"], capsys)
    assert code == 0
    assert json.loads(out)["totals"] == {}


def test_tiny_model_command_builds_a_loadable_folder(env, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative folder: the usage names it absolute
    code, out, _ = run_cli(["tiny-model", "tiny"], capsys)
    assert code == 0 and "tiny model written" in out
    # it says how to use the folder, and those overrides point the tiny model at it
    run = next(line for line in out.splitlines() if "reprogrid run" in line)
    overrides = shlex.split(run.strip())[2:-1]
    assert overrides == ["model=tiny", f"model.repo_id={(tmp_path / 'tiny').resolve()}"]
    from orchestrator.run.config.load import load_run_config

    models = load_run_config(overrides).models
    assert [(m.name, m.repo_id) for m in models] == [("tiny", str((tmp_path / "tiny").resolve()))]
    config = json.loads((tmp_path / "tiny" / "config.json").read_text())
    assert config["head_dim"] == 32 and config["num_hidden_layers"] == 2
    assert (tmp_path / "tiny" / "model.safetensors").is_file()
    assert (
        "chat_template" in (tmp_path / "tiny" / "tokenizer_config.json").read_text()
        or (tmp_path / "tiny" / "chat_template.jinja").is_file()
    )


def test_a_second_run_on_a_locked_store_exits_with_a_clear_message(env, capsys, tmp_path):
    with lock_held_elsewhere(tmp_path):
        code, _, err = run_cli(["run", "model=tiny", "backend=fake", f"store={tmp_path}"], capsys)
    assert code == 2
    assert "being written by another reprogrid process" in err and "--wait-lock" in err
    assert not (tmp_path / "settings").exists()  # nothing was written


def test_doctor_lists_backends_sandbox_and_executors(capsys):
    code, out, _ = run_cli(["doctor", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["backends"]["hf"] is True
    assert "network_namespace" in data["sandbox"]
    assert set(data["infibench_executors"]) >= {"python", "javascript", "cpp", "java", "go", "r"}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["plan", "experiment=paper-table"], "Did you mean: paper-table2?"),
        (["plan", "model=tiny", "modle=tiny"], "Did you mean: model?"),
        (["plan", "model=tiny", "+modle=tiny"], "Did you mean: model?"),
        (["plan", "model=tinyy"], "Did you mean: tiny?"),
        (["plan", "model=tiny", "benchmark.limit=abc"], "benchmark.limit must be an integer"),
        (["plan"], "no model: pass model=NAME"),
        (["run", "model=tiny", "execution.memory_mb=0"], "execution.memory_mb must be"),
        (["run", "model=tiny", "execution.timeout_s=-1"], "execution.timeout_s must be"),
        (["run", "model=tiny", "benchmark.limit=-5"], "benchmark.limit must be"),
    ],
)
def test_typos_and_bad_values_exit_2_before_anything_runs(env, capsys, tmp_path, args, needle):
    code, _, err = run_cli([*args, f"store={tmp_path / 'store'}"], capsys)
    assert code == 2 and needle in err
    assert not (tmp_path / "store").exists()  # nothing was started or written


@pytest.mark.parametrize(
    ("args", "typo", "group"),
    [
        (["run", "modle=tiny"], "modle", "model"),
        (["plan", "mode=tiny"], "mode", "model"),
        (["plan", "model=tiny", "experimnt=cpu-demo"], "experimnt", "experiment"),
        (["plan", "model=tiny", "benchmrk=humanevalfix"], "benchmrk", "benchmark"),
    ],
)
def test_a_mistyped_config_group_is_suggested_like_a_key(env, capsys, tmp_path, args, typo, group):
    """Groups (model=, experiment=, ...) are listed and suggested whether or not the command
    line selects one: `modle=tiny` alone used to list the keys without `model`."""
    code, _, err = run_cli([*args, f"store={tmp_path / 'store'}"], capsys)
    assert code == 2
    assert f"Unknown config key {typo!r}. Did you mean: {group}?" in err, err
    valid = err.split("Valid: ", 1)[1].strip().split(", ")
    assert set(GROUPS) <= set(valid) and valid == sorted(valid)
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        (
            "model.max_model_len=512",
            "'model.max_model_len' belongs to a model: select one with model",
        ),
        (
            "experiment.x=1",
            "no config key 'experiment.x': experiment=NAME selects a file that sets",
        ),
    ],
)
def test_a_key_under_a_group_says_what_the_group_is(env, capsys, tmp_path, override, needle):
    code, _, err = run_cli(["plan", override, f"store={tmp_path / 'store'}"], capsys)
    assert code == 2 and needle in err, err
    assert not (tmp_path / "store").exists()


def test_a_reader_that_stops_early_ends_the_output_quietly(env):
    """`reprogrid prompts ... | head -1`: the reader closes the pipe after one line of 200 KB of
    prompts; reprogrid stops without a traceback and exits 141 (128 + SIGPIPE, what the shell
    reports for a tool stopped by a closed pipe: the output is incomplete, so not 0)."""
    root = Path(__file__).resolve().parents[4]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    argv = [sys.executable, "-m", "orchestrator.cli", "prompts", "template=deepseek"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does once it has its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert json.loads(first)["task_id"] == "Python/0"
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err
