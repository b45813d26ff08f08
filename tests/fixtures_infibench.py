"""An InfiBench store for report tests, written as a current reprogrid writes one.

Two leaderboard models, one setting each with the official protocol (chat template, T=0.2
top_p 0.9, 30 samples per question, 1024 new tokens) over the 234 questions of suite v2.1. Each
question's 30 graded responses are chosen so that its three group bests (samples 0-9, 10-19,
20-29) are known, and so is best@10:

* deepseekcoder-6.7b-instruct: group totals 124.5, 125.0, 124.0 of 234 points: best@10 53.21
  (std 0.21), against the leaderboard's 53.25 +- 0.40 over 3 groups: within the spread.
* deepseekcoder-1.3b-instruct: group totals 70, 71, 72: best@10 30.34, the leaderboard's
  41.32 +- 1.12 is far outside it.

The executions, the headline (InfiBench's own `summarize`, over the real suite) and the scores
row's counts (workers/scoring.py) go through the code a run uses; settings rows carry the card.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from storage.store import Store
from tests.fixtures_store import LIBRARIES, NOW, RUN_ID
from workers.benchmarks.infibench.adapter import InfiBench, execution_record
from workers.benchmarks.infibench.definition import CARD
from workers.benchmarks.infibench.scores import MetricScore, ResponseScore, ResponseStatus
from workers.benchmarks.infibench.suite import Suite, load_suite
from workers.scoring import setting_counts

N_SAMPLES = 30
# model -> (repo id, size, tuning, the group totals T_g of its setting, in points)
INFIBENCH_MODELS: dict[str, tuple[str, float, str, tuple[float, float, float]]] = {
    "deepseekcoder-6.7b-instruct": (
        "deepseek-ai/deepseek-coder-6.7b-instruct",
        6.7,
        "instruct",
        (124.5, 125.0, 124.0),
    ),
    "deepseekcoder-1.3b-instruct": (
        "deepseek-ai/deepseek-coder-1.3b-instruct",
        1.3,
        "instruct",
        (70.0, 71.0, 72.0),
    ),
}


def load_v21(data_dir: Path) -> Suite:
    return load_suite(data_dir / "infibench")


def group_bests(total: float, n_questions: int) -> list[float]:
    """Per question its group best: whole points first, then one half point if needed."""
    whole = int(total)
    bests = [1.0] * whole + [0.0] * (n_questions - whole)
    if total - whole:
        bests[whole] = 0.5
    return bests


def responses(model: str, suite: Suite) -> list[ResponseScore]:
    """30 graded responses per question whose group bests give the model's totals; within a
    group the best is at a position that moves with the question, the others score less."""
    totals = INFIBENCH_MODELS[model][3]
    out = []
    per_group = [group_bests(t, len(suite.cases)) for t in totals]
    for q, case in enumerate(suite.cases):
        for g, bests in enumerate(per_group):
            best = bests[(q + 7 * g) % len(suite.cases)]  # each group its own questions
            for j in range(10):
                score = best if j == (q + g) % 10 else best / 4
                metric = MetricScore("keywords", score, 1.0, None, "keywords")
                out.append(
                    ResponseScore(
                        case.case_path,
                        case.case_id,
                        10 * g + j,
                        ResponseStatus.SCORED,
                        score,
                        (metric,),
                    )
                )
    return out


def _settings_row(model: str, key: str) -> dict[str, Any]:
    repo, size, tuning, _ = INFIBENCH_MODELS[model]
    return {
        "setting_key": key,
        "engine_key": "engine-" + key[:8],
        "status": "complete",
        "attempts": 1,
        "run_id": RUN_ID,
        "updated_at": NOW,
        "model_name": model,
        "model_repo_id": repo,
        "model_revision": "rev-" + key[:6],
        "model_family": "deepseekcoder",
        "model_size_b": size,
        "model_tuning": tuning,
        "backend": "vllm",
        "dtype": "bf16",
        "quant": "none",
        "bnb_4bit_quant_type": "fp4",
        "precision": "bf16",
        "benchmark": "infibench",
        "variant": "v2.1",
        "data_sha256": "i" * 64,
        "template": "chat",
        "template_kind": "own",
        "model_own_template": "deepseek",
        "decoding": "infibench",
        "do_sample": True,
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 0,
        "max_length": 1024,
        "length_semantics": "new_tokens",
        "n_samples": N_SAMPLES,
        "samples_per_call": 1,
        "seed": 0,
        "seed_policy": "per_sample",
        "setting_json": "{}",
        "n_problems": 234,
        "benchmark_n_problems": 234,
        "benchmark_card_json": CARD.to_json(),
        "hostname": "gpu-node-1",
        "device": "cuda:0 NVIDIA H100 80GB HBM3",
        "backend_version": "vllm 0.10.0",
        "effective_dtype": "bf16",
        "library_versions_json": LIBRARIES,
    }


def _score_row(setting: dict[str, Any], executions: list[dict[str, Any]], suite: Suite) -> dict:
    summary = InfiBench(suite).summarize(executions)
    counts = setting_counts([e["task_id"] for e in executions], [e["passed"] for e in executions])
    own = dict(summary.problem_scores)
    copied = """model_name model_family model_size_b model_tuning backend dtype quant precision
    variant template decoding temperature max_length length_semantics seed""".split()
    return {
        "setting_key": setting["setting_key"],
        "benchmark": "infibench",
        "metric": summary.metric,
        "value": summary.value,
        "value_std": summary.value_std,
        "n_problems": summary.n_problems,
        "n_samples": N_SAMPLES,
        **counts.columns(),
        "problem_scores": [own[t] for t in counts.counts.task_ids],
        "pass_at_1": counts.pass_at.get(1),
        "pass_at_10": counts.pass_at.get(10),
        "n_prompt_truncated": 0,
        "n_hit_length_limit": 0,
        "n_decode_mismatch": 0,
        "n_timeout": 0,
        "n_unscorable": summary.n_unscorable,
        "details": summary.details_json,
        **{c: setting[c] for c in copied},
    }


def write_infibench_setting(store: Store, model: str, suite: Suite) -> str:
    """One complete InfiBench setting of `model`; returns its key."""
    key = hashlib.sha256(f"infibench|{model}".encode()).hexdigest()
    setting = _settings_row(model, key)
    scores = responses(model, suite)
    records = [execution_record(s, 1.0) for s in scores]
    executions = [
        {
            "setting_key": key,
            "task_id": r.task_id,
            "sample_index": r.sample_index,
            "outcome": r.outcome.value,
            "passed": r.outcome.value == "passed",
            "score": r.score,
            "error_type": r.error_type,
            "error_message": r.error_message,
            "duration_s": 0.0,
            "details": r.details,
        }
        for r in records
    ]
    generations = [
        {
            "setting_key": key,
            "task_id": e["task_id"],
            "sample_index": e["sample_index"],
            "prompt": "p",
            "continuation": "c",
            "program": "c",
            "n_prompt_tokens": 100,
            "n_output_tokens": 20,
            "prompt_truncated": False,
            "hit_length_limit": False,
            "output_token_ids": [],
            "decode_mismatch": False,
            "seed": 1,
        }
        for e in executions
    ]
    store.write_rows("settings", key, [setting])
    store.write_rows("generations", key, generations)
    store.write_rows("executions", key, executions)
    store.write_rows("scores", key, [_score_row(setting, executions, suite)])
    return key


def write_infibench_store(root: str, suite: Suite) -> dict[str, str]:
    """Every model of INFIBENCH_MODELS; returns {model: setting key}."""
    store = Store(root)
    return {model: write_infibench_setting(store, model, suite) for model in INFIBENCH_MODELS}
