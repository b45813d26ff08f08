"""What the demo is about, where users look, on the real path (Ray, the transformers backend, the
sandbox, the store). A tiny model whose tokenizer takes `<|im_start|>` as its BOS token, as
SmolLM2's does, under the harness's ChatML template (`yi`, the tiny model's own): the harness
drops the leading BOS id before decoding and slices at len(prompt) characters, so every
continuation loses 12 characters and every sample is flagged `decode_mismatch`. The run ends
with the commands to run next on its store, a `show` of a cut sample among them; that `show`
(text and JSON) and the report's notes say what happened; the folder above the store is not a
store to any reading command, and a run into it is refused."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

from orchestrator.cli import main
from orchestrator.report.tables.mismatch import DOCS

GRID = [
    "model=tiny",
    "model.builder=null",
    "benchmark.limit=2",
    "template=own",
    "decoding=greedy",
    "max_length=2048",
    "dtype=fp32",
    "backend=hf",
]


def bos_is_im_start(built: Path, folder: Path) -> Path:
    """A copy of the tiny model whose tokenizer adds no BOS of its own and names
    `<|im_start|>` its BOS token: a ChatML prompt then starts with the BOS id (SmolLM2's way)."""
    shutil.copytree(built, folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps(config | {"bos_token": "<|im_start|>"}))
    tokenizer_path = folder / "tokenizer.json"
    tokenizer = json.loads(tokenizer_path.read_text())
    tokenizer_path.write_text(json.dumps(tokenizer | {"post_processor": None}))
    return folder


def next_commands(out: str) -> list[list[str]]:
    """The argv of each command the run printed after `next:`."""
    lines = out.split("\nnext:\n", 1)[1].splitlines()
    commands = [shlex.split(line, comments=True) for line in lines if line.startswith("  ")]
    assert all(c[0] == "reprogrid" for c in commands), commands
    return [c[1:] for c in commands]


def test_a_run_whose_samples_the_harness_slicing_cuts_says_so_where_users_look(
    env, cache_dir, capsys, tmp_path
):
    model = bos_is_im_start(cache_dir / "models" / "tiny-llama", tmp_path / "tiny-bos")
    store = str(tmp_path / "results" / "demo")
    code = main(["run", *GRID, f"model.repo_id={model}", f"store={store}"])
    out = capsys.readouterr().out
    assert code == 0, out

    commands = next_commands(out)
    assert commands[:2] == [["report", "--store", store], ["view", "--store", store]]
    show = commands[2]
    assert show[:4] == ["show", "--store", store, "--setting"] and "--problem" in show
    assert f"decode mismatch, {DOCS}" in out.split("\nnext:\n", 1)[1]
    key12, task = show[4], show[show.index("--problem") + 1]

    # show: the flag in the outcome line, and a note with the docs
    assert main(show) == 0
    text = capsys.readouterr().out
    assert f"setting  {key12}" in text and f"problem  {task}" in text
    assert text.splitlines()[2].endswith("decode mismatch]")  # the outcome line's flags
    assert "note     decode mismatch: the harness's prompt slicing cut this" in text
    assert DOCS in text
    assert main([*show, "--json"]) == 0
    sample = json.loads(capsys.readouterr().out)["sample"]
    assert sample["decode_mismatch"] is True and sample["task_id"] == task
    # the 12 characters of `<|im_start|>` are missing: the decoded text starts at "user"
    assert sample["prompt"].startswith("<|im_start|>user")

    # the report's notes: per setting, how many samples, with the docs
    report = tmp_path / "report"
    assert main(["report", "--store", store, "--format", "json", "--out", str(report)]) == 0
    printed = capsys.readouterr().out
    notes = json.loads((report / "report.json").read_text())["notes"]
    cut = [n for n in notes if "lost characters to the harness's prompt slicing" in n]
    assert len(cut) == 1 and f"({key12}): 2/2 samples" in cut[0] and DOCS in cut[0]
    assert f"note: {cut[0]}" in printed

    # the folder above the store is not a store: named, exit 2, for a reader and a run
    above = str(tmp_path / "results")
    assert main(["status", "--store", above]) == 2
    err = capsys.readouterr().err
    assert f"{above} is not a store; it holds {store}" in err
    assert main(["run", *GRID, f"model.repo_id={model}", f"store={above}"]) == 2
    assert f"it holds {store}" in capsys.readouterr().err
