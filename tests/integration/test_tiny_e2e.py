"""The real path end to end: `reprogrid run` with the tiny model on all 164 problems, fp32 and
8-bit (bitsandbytes on CPU), through Ray, the sandbox and the Parquet store."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd


def test_tiny_model_all_164_problems_fp32_and_int8(env, tmp_path):
    store = tmp_path / "store"
    cmd = [
        sys.executable,
        "-m",
        "orchestrator.cli",
        "run",
        "model=tiny",
        "precision=fp32,int8",
        "template=instruct",
        "max_length=512",
        f"store={store}",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pass@1" in done.stdout and str(store) in done.stdout

    settings = pd.read_parquet(store / "settings")
    generations = pd.read_parquet(store / "generations")
    executions = pd.read_parquet(store / "executions")
    scores = pd.read_parquet(store / "scores")
    assert sorted(settings.precision) == ["fp32", "int8"]
    assert set(settings.status) == {"complete"}
    assert set(settings.effective_dtype) == {"float32", "float16"} or "int8" in set(settings.quant)
    for frame in (generations, executions):
        assert frame.groupby("setting_key").size().tolist() == [164, 164]
    assert set(executions.outcome) <= {"passed", "failed", "timeout", "error"}
    # prompts of 512 tokens or more are truncated and flagged (about a fifth of the problems)
    truncated = generations.groupby("setting_key").prompt_truncated.sum()
    assert (truncated > 10).all() and (truncated < 100).all()
    # the random model writes varied text, not one degenerate output for every prompt
    assert generations.continuation.nunique() > 50
    assert (generations.n_output_tokens > 0).sum() > 100
    # pass@1 is the fraction of problems whose program passed
    for row in scores.itertuples():
        mine = executions[executions.setting_key == row.setting_key]
        assert row.pass_at_1 == mine.passed.sum() / 164
        assert row.n_problems == 164
    assert set(scores.n_prompt_truncated) == set(truncated)

    # the report runs end to end on a tiny-model store (no literature values for `tiny`)
    cmd = [
        sys.executable,
        "-m",
        "orchestrator.cli",
        "report",
        "--store",
        str(store),
        "--format",
        "md,json,html",
        "--out",
        str(tmp_path / "report"),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert "no literature rows for model tiny" in json.dumps(report["notes"])
    assert (tmp_path / "report" / "report.md").is_file()
    assert (tmp_path / "report" / "report.html").is_file()
