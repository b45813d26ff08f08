"""Synthetic stores for report and harness tests, written through Store.write_rows (real schema).

`write_synthetic_store`: two models (DeepSeekCoder 1.3B base and instruct) x a handful of
settings on 164 problems, plus a skipped and a failed setting. Pass counts are chosen so the
literature join has something to find: the base model's baseline scores 2/164 (rounds to the
reported 1.2), the instruct model's baseline 27/164 (floors to 16.4, a value reported for the
*base* model: tuning confusion), its instruct-template setting 15/164 (9.1).

`write_setting` writes a setting as a current reprogrid does (run-time facts, the benchmark card,
the exact counts behind its score); `write_synthetic_store` writes rows as reprogrid did before
those were stored (the report derives them: template kinds from config, cards from the registry,
counts from the executions).

`write_canonical_store`: one setting of model `tiny` on the first few real HumanEvalFix problems
whose programs are the canonical fixes (or the buggy code for some), for the export/import round
trip through the real sandbox.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from storage.store import Store
from workers.benchmarks.humanevalfix.definition import CARD
from workers.scoring import setting_counts

N_PROBLEMS = 164
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
RUN_ID = "20250102T030405-fixture"
LIBRARIES = json.dumps({"python": "3.11.7", "torch": "2.13.0", "transformers": "5.16.1"})

MODELS: dict[str, dict[str, Any]] = {
    "deepseekcoder-1.3b-base": dict(
        model_repo_id="deepseek-ai/deepseek-coder-1.3b-base",
        model_tuning="base",
        own="deepseek",
        model_revision="rev-base-0001",
    ),
    "deepseekcoder-1.3b-instruct": dict(
        model_repo_id="deepseek-ai/deepseek-coder-1.3b-instruct",
        model_tuning="instruct",
        own="deepseek",
        model_revision="rev-inst-0001",
    ),
    "deepseekcoder-6.7b-instruct": dict(
        model_repo_id="deepseek-ai/deepseek-coder-6.7b-instruct",
        model_tuning="instruct",
        own="deepseek",
        model_revision="rev-67-inst",
        model_size_b=6.7,
    ),
}
PRECISIONS = {
    "bf16": ("bf16", "none"),
    "fp16": ("fp16", "none"),
    "fp32": ("fp32", "none"),
    "int8": ("fp16", "int8"),
    "int4": ("fp16", "int4"),
}


@dataclass(frozen=True)
class Spec:
    model: str
    template: str  # "own" or a harness template name
    decoding: str  # greedy | t0.8
    max_length: int
    precision: str
    passes: int  # greedy: problems solved; sampled: total passing samples
    n_samples: int = 1
    truncated: int = 0  # samples with a truncated prompt
    hit_limit: int = 0  # samples that hit the length limit
    status: str = "complete"
    reason: str | None = None
    backend: str = "hf"
    variant: str = "tests"  # humanevalfix variant: tests (what papers report) or docs


BASE, INST = "deepseekcoder-1.3b-base", "deepseekcoder-1.3b-instruct"
SPECS = (
    Spec(BASE, "own", "greedy", 2048, "bf16", 2),
    Spec(BASE, "instruct", "greedy", 2048, "bf16", 5),
    Spec(BASE, "own", "greedy", 512, "bf16", 1, truncated=3, hit_limit=10),
    Spec(BASE, "own", "greedy", 2048, "fp16", 3),
    Spec(BASE, "own", "greedy", 2048, "int4", 2),
    Spec(BASE, "own", "t0.8", 2048, "bf16", 9, n_samples=5),
    Spec(
        BASE,
        "own",
        "greedy",
        2048,
        "int8",
        0,
        status="skipped",
        backend="vllm",
        reason="vLLM quantizes with bitsandbytes only to 4-bit in flight",
    ),
    Spec(INST, "own", "greedy", 2048, "bf16", 27),
    Spec(INST, "instruct", "greedy", 2048, "bf16", 15),
    Spec(INST, "own", "greedy", 512, "bf16", 20, truncated=4, hit_limit=7),
    Spec(INST, "own", "greedy", 2048, "fp16", 26),
    Spec(INST, "own", "greedy", 2048, "int4", 24),
    Spec(INST, "own", "t0.8", 2048, "bf16", 101, n_samples=5),
    Spec(
        INST,
        "own",
        "greedy",
        2048,
        "fp32",
        0,
        status="failed",
        reason="CUDA out of memory. Tried to allocate 2.00 GiB",
    ),
)


def spec_key(spec: Spec) -> str:
    text = f"{spec.model}|{spec.template}|{spec.decoding}|{spec.max_length}|{spec.precision}"
    text += f"|{spec.backend}|{spec.n_samples}"
    if spec.variant != "tests":  # keys of the tests variant stay what they always were
        text += f"|{spec.variant}"
    return hashlib.sha256(text.encode()).hexdigest()


def _settings_row(spec: Spec, key: str, n_problems: int = N_PROBLEMS) -> dict[str, Any]:
    model = MODELS.get(spec.model, {})
    dtype, quant = PRECISIONS[spec.precision]
    sampled = spec.decoding != "greedy"
    template = model.get("own", "yi") if spec.template == "own" else spec.template
    row = {
        "setting_key": key,
        "engine_key": "engine-" + key[:8],
        "status": spec.status,
        "status_reason": spec.reason,
        "attempts": 1,
        "run_id": RUN_ID,
        "updated_at": NOW,
        "model_name": spec.model,
        "model_repo_id": model.get("model_repo_id", spec.model),
        "model_revision": model.get("model_revision", "r0"),
        "model_family": "deepseekcoder",
        "model_size_b": model.get("model_size_b", 1.3),
        "model_tuning": model.get("model_tuning", "instruct"),
        "backend": spec.backend,
        "dtype": dtype,
        "quant": quant,
        "bnb_4bit_quant_type": "fp4",
        "precision": spec.precision,
        "benchmark": "humanevalfix",
        "variant": spec.variant,
        "data_sha256": "d" * 64,
        "limit": None,
        "template": template,
        "decoding": spec.decoding,
        "do_sample": sampled,
        "temperature": 0.8 if sampled else 0.0,
        "top_p": 0.95 if sampled else 1.0,
        "top_k": 0,
        "max_length": spec.max_length,
        "length_semantics": "total",
        "n_samples": spec.n_samples,
        "samples_per_call": 1,
        "seed": 0,
        "seed_policy": "harness",
        "setting_json": "{}",
    }
    if spec.status == "failed":
        row["error_type"] = "OutOfMemoryError"
    if spec.status == "complete":
        row.update(
            hostname="gpu-node-1",
            node_id="node-1",
            device="cuda:0 NVIDIA H100 80GB HBM3",
            backend_version="transformers 5.16.1",
            effective_dtype=dtype,
            tokenizer_sha256="t" * 64,
            library_versions_json=LIBRARIES,
        )
    return row


def _passes(spec: Spec, key: str, n_problems: int) -> np.ndarray:
    """passed[problem, sample]: `spec.passes` passing samples at seeded random positions."""
    rng = np.random.default_rng(int(key[:8], 16))
    flat = np.zeros(n_problems * spec.n_samples, dtype=bool)
    flat[rng.choice(flat.size, size=spec.passes, replace=False)] = True
    return flat.reshape(n_problems, spec.n_samples)


def _write_results(
    store: Store, spec: Spec, key: str, passed: np.ndarray, current: bool = False
) -> None:
    """Generations, executions and the score; `current`: the score row with its counts."""
    n_problems, n_samples = passed.shape
    gens, execs = [], []
    for i in range(n_problems):
        for j in range(n_samples):
            flat = i * n_samples + j
            gens.append(
                {
                    "setting_key": key,
                    "task_id": f"Python/{i}",
                    "sample_index": j,
                    "prompt": "p",
                    "continuation": "c",
                    "program": f"def f_{i}_{j}():\n    pass\n",
                    "n_prompt_tokens": 100,
                    "n_output_tokens": 20,
                    "prompt_truncated": flat < spec.truncated,
                    "hit_length_limit": flat < spec.hit_limit,
                    "output_token_ids": [],
                    "decode_mismatch": False,
                    "seed": None,
                }
            )
            ok = bool(passed[i, j])
            execs.append(
                {
                    "setting_key": key,
                    "task_id": f"Python/{i}",
                    "sample_index": j,
                    "outcome": "passed" if ok else "failed",
                    "passed": ok,
                    "score": float(ok),
                    "error_type": None if ok else "AssertionError",
                    "error_message": None,
                    "duration_s": 0.1,
                    "details": None,
                }
            )
    store.write_rows("generations", key, gens)
    store.write_rows("executions", key, execs)
    score = _score_row(spec, key, passed)
    if current:
        task_ids = [e["task_id"] for e in execs]
        score.update(setting_counts(task_ids, [e["passed"] for e in execs]).columns())
    store.write_rows("scores", key, [score])


def _score_row(spec: Spec, key: str, passed: np.ndarray) -> dict[str, Any]:
    setting = _settings_row(spec, key, passed.shape[0])
    pass1 = float(passed.mean(axis=1).mean())
    copied = (
        "model_name",
        "model_family",
        "model_size_b",
        "model_tuning",
        "backend",
        "dtype",
        "quant",
        "precision",
        "variant",
        "template",
        "decoding",
        "temperature",
        "max_length",
        "length_semantics",
        "seed",
    )
    return {
        "setting_key": key,
        "benchmark": "humanevalfix",
        "metric": "pass@1",
        "value": pass1,
        "n_problems": passed.shape[0],
        "n_samples": spec.n_samples,
        "n_passed": int(passed.sum()),
        "pass_at_1": pass1,
        "n_prompt_truncated": spec.truncated,
        "n_hit_length_limit": spec.hit_limit,
        "n_decode_mismatch": 0,
        "n_timeout": 0,
        "n_unscorable": 0,
        **{c: setting[c] for c in copied},
    }


def _write_run(store: Store, keys: list[str]) -> None:
    store.write_rows(
        "runs",
        RUN_ID,
        [
            {
                "run_id": RUN_ID,
                "started_at": NOW,
                "finished_at": NOW,
                "command": "run",
                "overrides_json": "[]",
                "setting_keys": keys,
                "n_generated": len(keys),
                "n_executed": len(keys),
                "git_revision": "0" * 40,
                "hostname": "driver-1",
                "library_versions_json": LIBRARIES,
                "data_sources_json": "{}",
                "cluster_address": "local",
                "status": "finished",
            }
        ],
    )


REPEAT_RUN_ID = "20250102T040000-repeat"


def write_repeat_check(
    store: Store, key: str, backend: str = "hf", n_problems: int = 40, changed: int = 1
) -> None:
    """A recorded `repeat-check` of one setting: `changed` of its first `n_problems` problems
    flipped pass/fail on re-generation (noise floor 100 x changed / n_problems points)."""
    store.write_rows(
        "repeat_checks",
        REPEAT_RUN_ID,
        [
            {
                "run_id": REPEAT_RUN_ID,
                "checked_at": NOW,
                "setting_key": key,
                "backend": backend,
                "model_name": BASE,
                "n_problems": n_problems,
                "n_samples": n_problems,
                "n_program_changed": changed + 2,
                "n_continuation_changed": changed + 3,
                "n_tokens_changed": changed + 3,
                "n_executed": changed + 2,
                "n_outcome_changed": changed,
                "outcome_change_sum": float(changed),
                "stored_score": 0.1,
                "repeated_score": 0.1 + changed / n_problems,
            }
        ],
    )


def write_synthetic_store(root: str) -> dict[str, Spec]:
    """Write the synthetic store under `root`; returns {setting key: spec}. It holds one
    recorded repeat-check (the base model's baseline, hf: 1 of 40 problems flipped)."""
    store = Store(root)
    out = {}
    for spec in SPECS:
        key = spec_key(spec)
        out[key] = spec
        store.write_rows("settings", key, [_settings_row(spec, key)])
        if spec.status == "complete":
            _write_results(store, spec, key, _passes(spec, key, N_PROBLEMS))
    _write_run(store, list(out))
    write_repeat_check(store, spec_key(SPECS[0]))
    return out


def write_canonical_store(root: str, problem_set, n_problems: int = 5, buggy=(3,)) -> str:
    """One greedy setting of model `tiny` (own template, 2048, fp32, hf, limit n_problems) whose
    programs are the canonical fixes of the first problems (the buggy code for `buggy`)."""
    from workers.benchmarks.humanevalfix.adapter import reference_samples
    from workers.spec import Variant

    store = Store(root)
    spec = Spec("tiny", "own", "greedy", 2048, "fp32", n_problems - len(buggy))
    key = "c" * 64
    canonical = reference_samples(problem_set, Variant.TESTS, buggy=False)[:n_problems]
    wrong = reference_samples(problem_set, Variant.TESTS, buggy=True)[:n_problems]
    programs = [
        (w if i in buggy else c).program
        for i, (c, w) in enumerate(zip(canonical, wrong, strict=True))
    ]
    passed = np.array([[i not in buggy] for i in range(n_problems)])
    row = _settings_row(spec, key, n_problems) | {"limit": n_problems, "model_family": "tiny"}
    store.write_rows("settings", key, [row])
    _write_results(store, spec, key, passed)
    gens = store.read_shard("generations", key).to_pylist()
    for g, program in zip(gens, programs, strict=True):
        g["program"] = program
    store.write_rows("generations", key, gens)
    return key


def write_setting(
    store: Store,
    spec: Spec,
    n_problems: int = N_PROBLEMS,
    benchmark_n_problems: int = N_PROBLEMS,
    tag: str = "",
) -> str:
    """One complete setting over the first `n_problems` problems, with the run-time facts a
    current reprogrid stores (a pilot when `n_problems < benchmark_n_problems`). Returns its key.
    `tag` makes another setting of the same cell (e.g. a second imported file)."""
    key = hashlib.sha256(f"{spec_key(spec)}|{n_problems}{tag}".encode()).hexdigest()
    row = _settings_row(spec, key, n_problems)
    row.update(
        limit=n_problems if n_problems < benchmark_n_problems else None,
        n_problems=n_problems,
        benchmark_n_problems=benchmark_n_problems,
        template_kind=spec.template,
        model_own_template=MODELS.get(spec.model, {}).get("own", "yi"),
        benchmark_card_json=CARD.to_json(),
    )
    store.write_rows("settings", key, [row])
    _write_results(store, spec, key, _passes(spec, key, n_problems), current=True)
    return key


# ---------------------------------------------------------------------------------------------
# A store with known effects: the paper's 60-setting grid per model, passes = a model's base
# plus one offset per axis value (the precision offsets depend on the decoding, so the spread
# across precisions grows with the temperature by a known amount).

GRID_BASE = {BASE: 30, INST: 60}  # problems solved by the baseline setting
GRID_OFFSETS: dict[str, dict[Any, int]] = {
    "template": {"own": 0, "instruct": -6},
    "decoding": {"greedy": 0, "t0.2": -2, "t0.8": -5},
    "max_length": {2048: 0, 512: -4},
}
PRECISION_OFFSETS = {
    "greedy": {"bf16": 0, "fp16": 1, "fp32": 2, "int8": -1, "int4": -3},
    "t0.2": {"bf16": 0, "fp16": 2, "fp32": 3, "int8": -1, "int4": -4},
    "t0.8": {"bf16": 0, "fp16": 2, "fp32": 4, "int8": -2, "int4": -5},
}


def grid_passes(model: str, template: str, decoding: str, max_length: int, precision: str) -> int:
    """Problems solved by one setting of `write_grid_store`."""
    return (
        GRID_BASE[model]
        + GRID_OFFSETS["template"][template]
        + GRID_OFFSETS["decoding"][decoding]
        + GRID_OFFSETS["max_length"][max_length]
        + PRECISION_OFFSETS[decoding][precision]
    )


def write_grid_store(root: str, models: tuple[str, ...] = (BASE, INST)) -> dict[str, Spec]:
    """60 complete settings per model (2 templates x 3 decodings x 2 lengths x 5 precisions,
    one sample per problem), with the facts a current reprogrid stores; {key: spec}."""
    store = Store(root)
    out = {}
    for model in models:
        for template in GRID_OFFSETS["template"]:
            for decoding in GRID_OFFSETS["decoding"]:
                for length in GRID_OFFSETS["max_length"]:
                    for precision in PRECISION_OFFSETS[decoding]:
                        passes = grid_passes(model, template, decoding, length, precision)
                        spec = Spec(model, template, decoding, length, precision, passes)
                        out[write_setting(store, spec)] = spec
    _write_run(store, list(out))
    return out


# ---------------------------------------------------------------------------------------------
# A store for the problems view and `show`: every sample's state is known. Model `tiny`, four
# greedy settings over six problems, and model `tiny-b` with two settings.

VIEW_SETTINGS = (
    Spec("tiny", "own", "greedy", 2048, "fp32", 0),
    Spec("tiny", "instruct", "greedy", 2048, "fp32", 0),
    Spec("tiny", "own", "greedy", 512, "fp32", 0),
    Spec("tiny", "own", "t0.8", 2048, "fp32", 0),
)
# VIEW_STATES[problem][setting]: P passed, F failed, E error, T timeout, R truncated prompt,
# L hit the length limit (and failed). Pass shares 4/4, 0/4, 2/4, 1/4, 1/4, 3/4: sorted by
# disagreement, Python/2 comes first (half the settings solve it), then Python/3, 4 and 5.
VIEW_STATES = ("PPPP", "FFFF", "PFPF", "PELF", "FTRP", "PPPF")
VIEW_ERRORS = {
    "F": ("AssertionError", "assert candidate(2) == 4"),
    "E": ("SyntaxError", "invalid syntax (<string>, line 3)"),
    "T": ("TimeoutError", "timed out after 10.0 s"),
    "L": ("SyntaxError", "unexpected EOF while parsing"),
    "R": ("AssertionError", "assert candidate(2) == 4"),
}
VIEW_OUTCOMES = {"P": "passed", "F": "failed", "E": "error", "T": "timeout", "L": "error"}


def view_program(problem: int, setting: int) -> str:
    """The program setting `setting` wrote for `problem`: the second line differs by setting."""
    return f"def f{problem}(x):\n    y = x + {setting}\n    return y * {problem}\n"


def view_prompt(problem: int, template: str) -> str:
    return f"Fix bugs in f{problem} ({template}).\ndef f{problem}(x):\n    return x\n"


def write_view_store(root: str) -> list[str]:
    """Write the problems-view store under `root`; returns tiny's four keys in grid order (the
    order of VIEW_SETTINGS: own greedy 512 sorts before own greedy 2048, so the list is
    reordered: [own 512, own 2048, own t0.8, instruct])."""
    store = Store(root)
    keys = []
    for s, spec in enumerate(VIEW_SETTINGS):
        key = hashlib.sha256(f"view|{s}".encode()).hexdigest()
        keys.append(key)
        row = _settings_row(spec, key, len(VIEW_STATES)) | {"model_family": "tiny"}
        store.write_rows("settings", key, [row])
        gens, execs = [], []
        for p, states in enumerate(VIEW_STATES):
            state = states[s]
            program = view_program(p, s)
            gens.append(
                {
                    "setting_key": key,
                    "task_id": f"Python/{p}",
                    "sample_index": 0,
                    "prompt": view_prompt(p, spec.template),
                    "continuation": f"Here is the fix:\n```python\n{program}```\nDone.",
                    "program": program,
                    "n_prompt_tokens": 30,
                    "n_output_tokens": 2048 if state == "L" else 40,
                    "prompt_truncated": state == "R",
                    "hit_length_limit": state == "L",
                    "output_token_ids": [],
                    "decode_mismatch": False,
                    "seed": None,
                }
            )
            error = VIEW_ERRORS.get(state, (None, None))
            execs.append(
                {
                    "setting_key": key,
                    "task_id": f"Python/{p}",
                    "sample_index": 0,
                    "outcome": VIEW_OUTCOMES.get(state, "failed"),
                    "passed": state == "P",
                    "score": float(state == "P"),
                    "error_type": error[0],
                    "error_message": error[1],
                    "duration_s": 10.0 if state == "T" else 0.1,
                    "details": None,
                }
            )
        store.write_rows("generations", key, gens)
        store.write_rows("executions", key, execs)
    other = Spec("tiny-b", "own", "greedy", 2048, "bf16", 3)
    for tag in ("a", "b"):
        write_setting(store, other, n_problems=len(VIEW_STATES), tag=tag)
    _write_run(store, keys)
    return [keys[2], keys[0], keys[3], keys[1]]


def complete_keys(store: str | Path) -> set[str]:
    """The setting keys a live store holds complete: none while its settings folder is missing or
    its first shard is still a temporary file (a run writing it as the test polls)."""
    import pandas as pd

    if not (Path(store) / "settings").is_dir():
        return set()
    try:
        frame = pd.read_parquet(Path(store) / "settings")
    except (OSError, ValueError):
        return set()
    if "status" not in frame.columns:
        return set()
    return set(frame[frame.status == "complete"].setting_key)
