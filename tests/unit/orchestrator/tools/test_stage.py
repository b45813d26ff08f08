"""`stage` (orchestrator/tools/stage.py): which files of a repository it fetches, and what it
does where it has nothing to fetch or cannot reach the Hub. The command runs in a fresh
interpreter (huggingface_hub reads HF_ENDPOINT, HF_HUB_CACHE and HF_HUB_OFFLINE when imported),
counting its connects to the Hub's port: an unreachable Hub costs one, not a retry loop.
Staging from a Hub that serves files, and the offline run on what it staged:
tests/integration/test_stage.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.tools.stage import files_to_stage
from tests.unit.orchestrator.run.preflight.hub_server import (
    cli_counting_connects,
    closed_port,
    hub_env,
)

ROOT = Path(__file__).resolve().parents[4]
# A Hub model of the shipped configs, at its configured revision (main)
HUB_MODEL = "deepseekcoder-1.3b-base"
REPO = "deepseek-ai/deepseek-coder-1.3b-base"
TOKENIZER = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        # one safetensors checkpoint: the .bin copy, Flax, TF, ONNX and GGUF files are left
        (
            [
                "config.json",
                "generation_config.json",
                *TOKENIZER,
                "model.safetensors",
                "pytorch_model.bin",
                "flax_model.msgpack",
                "tf_model.h5",
                "onnx/model.onnx",
                "model.Q4_K_M.gguf",
                "README.md",
                ".gitattributes",
            ],
            [
                ".gitattributes",
                "README.md",
                "config.json",
                "generation_config.json",
                "model.safetensors",
                *sorted(TOKENIZER),
            ],
        ),
        # sharded: every shard and the index of the format that is fetched
        (
            [
                "config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "pytorch_model-00001-of-00002.bin",
                "pytorch_model-00002-of-00002.bin",
                "pytorch_model.bin.index.json",
                "original/consolidated.00.pth",
                "tokenizer.model",
                "training_args.bin",
            ],
            [
                "config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "tokenizer.model",
            ],
        ),
        # no safetensors: the PyTorch checkpoint, with remote code and its chat template
        (
            [
                "config.json",
                "pytorch_model.bin",
                "modeling_custom.py",
                "chat_template.jinja",
                "vocab.txt",
            ],
            [
                "chat_template.jinja",
                "config.json",
                "modeling_custom.py",
                "pytorch_model.bin",
                "vocab.txt",
            ],
        ),
    ],
)
def test_only_the_files_a_backend_loads_are_staged(names, expected):
    assert list(files_to_stage(names)) == expected


def stage(tmp_path: Path, env: dict[str, str], *args: str, offline: bool = False):
    """`reprogrid stage ARGS` against a closed port as the Hub; (result, connects to it)."""
    port = closed_port()
    run_env = hub_env(env, f"http://127.0.0.1:{port}", tmp_path / "hub-cache", ROOT)
    if offline:
        run_env["HF_HUB_OFFLINE"] = "1"
    return cli_counting_connects(["stage", *args], run_env, port, ROOT)


def test_an_unreachable_hub_fails_every_model_at_once_with_exit_2(env, tmp_path):
    done, connects = stage(tmp_path, env, f"model={HUB_MODEL},codellama-7b-base")
    assert done.returncode == 2, done.stderr
    assert connects == 1  # the probe; no request, no retry loop
    errors = [line for line in done.stderr.splitlines() if line.startswith("reprogrid stage:")]
    assert len(errors) == 2, done.stderr
    assert f"{HUB_MODEL}: no network: {REPO} at revision main: not staged" in errors[0]
    assert "cannot be reached" in errors[0] and "codellama/CodeLlama-7b-hf" in errors[1]
    assert not (tmp_path / "hub-cache").exists()  # nothing written


def test_offline_mode_on_the_staging_machine_is_an_error_without_a_connect(env, tmp_path):
    done, connects = stage(tmp_path, env, f"model={HUB_MODEL}", "--json", offline=True)
    assert done.returncode == 2 and connects == 0, done.stderr
    report = json.loads(done.stdout)
    assert not report["ok"]
    [model] = report["models"]
    assert (model["status"], model["repo_id"]) == ("no network", REPO)
    assert "HF_HUB_OFFLINE is set" in model["detail"]


def test_a_built_in_model_needs_nothing_from_the_hub(env, tmp_path):
    done, connects = stage(tmp_path, env, "model=tiny")
    assert done.returncode == 0 and connects == 0, done.stderr
    assert "tiny: " in done.stdout and ": not needed" in done.stdout
    assert "built offline" in done.stdout and "HF_HUB_OFFLINE=1" in done.stdout


def test_a_grid_without_a_model_is_a_config_error(env, tmp_path):
    done, connects = stage(tmp_path, env)
    assert done.returncode == 2 and connects == 0
    assert "stage needs the grid's models: model=NAME" in done.stderr
