"""InfiBench through `reprogrid run`: the tiny model end to end on a subset, and the replay
backend scoring official GPT-3.5 dev responses exactly as the official grader did."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd


def run(args, env):
    cmd = [sys.executable, "-m", "orchestrator.cli", "run", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_tiny_model_runs_an_infibench_setting(env, tmp_path):
    store = tmp_path / "store"
    out = run(
        [
            "benchmark=infibench",
            "model=tiny",
            "benchmark.limit=8",
            "n_samples=2",
            "max_length=32",
            f"store={store}",
        ],
        env,
    )
    assert "best@10" in out
    settings = pd.read_parquet(store / "settings")
    assert settings.template.tolist() == ["chat"] and settings.status.tolist() == ["complete"]
    assert settings.length_semantics.tolist() == ["new_tokens"]
    generations = pd.read_parquet(store / "generations")
    assert len(generations) == 16
    assert generations.prompt.str.startswith("<|im_start|>system\nYou are a professional").all()
    executions = pd.read_parquet(store / "executions")
    assert len(executions) == 16 and executions.details.notna().all()
    score = pd.read_parquet(store / "scores").iloc[0]
    assert score.metric == "best@10" and score.n_problems == 8
    assert 0.0 <= score.value <= 1.0


def test_replayed_official_dev_responses_score_like_the_official_grader(env, tmp_path, shared_data):
    official = shared_data / "infibench" / "official_results" / "dev_v2.0.0"
    responses = pd.read_csv(official / "responses.csv.gz")
    scores = pd.read_csv(official / "per_response_scores.csv")
    cases = list(dict.fromkeys(responses.filename))[:6]  # keyword / blank questions, no toolchain
    replay = tmp_path / "replay.jsonl"
    with replay.open("w") as fh:
        for row in responses[responses.filename.isin(cases)].itertuples():
            completion = "" if pd.isna(row.completion) else row.completion
            fh.write(
                json.dumps(
                    {
                        "task_id": row.filename,
                        "sample_index": int(row.completion_no),
                        "continuation": completion,
                    }
                )
                + "\n"
            )
    store = tmp_path / "store"
    run(
        [
            "benchmark=infibench",
            "benchmark.variant=dev",
            "backend=replay",
            "model=tiny",
            "template=default",
            f"replay_path={replay}",
            "benchmark.limit=6",
            f"store={store}",
        ],
        env,
    )
    executions = pd.read_parquet(store / "executions")
    assert len(executions) == 6 * 30
    merged = executions.merge(
        scores, left_on=["task_id", "sample_index"], right_on=["case_path", "sample_idx"]
    )
    assert len(merged) == 180
    assert (merged.score_x - merged.score_y).abs().max() < 1e-9
    settings = pd.read_parquet(store / "settings")
    assert settings.backend.tolist() == ["replay"]
