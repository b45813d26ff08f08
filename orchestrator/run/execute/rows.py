"""Specs and worker results -> store rows (plain dicts in the store's schema). Pure."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from storage.provenance import (
    LISTED,
    VERSIONS_COLUMN,
    VERSIONS_TEXT_COLUMN,
    merged_values,
    merged_versions,
    values_of,
    values_text,
    versions_json,
    versions_of,
    versions_text,
)
from storage.schema import SettingStatus
from workers.benchmarks.base import ScoreSummary
from workers.execspec import ExecutionRecord, Outcome
from workers.keys import canonical_json, engine_key, setting_fields
from workers.scoring import setting_counts
from workers.spec import SampleRecord, SettingGenerations, SettingSpec, precision_label


@dataclass(frozen=True)
class SettingFacts:
    """What an analysis needs about a setting beyond its spec, fixed when it runs (so that a
    report reads the store alone; editing sweeps/ later changes nothing)."""

    template_kind: str  # "own" when the template is the model's own format, else its name
    n_problems: int  # problems the setting covers
    benchmark_n_problems: int  # problems the benchmark holds (more: the setting is a pilot)
    card_json: str | None = None  # the benchmark's card (workers/card.py), canonical JSON


def setting_row(
    key: str,
    setting: SettingSpec,
    status: SettingStatus,
    *,
    now: datetime,
    run_id: str,
    facts: SettingFacts | None = None,
    reason: str | None = None,
    error_type: str | None = None,
    attempts: int = 0,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "setting_key": key,
        "engine_key": engine_key(setting.engine),
        "status": status.value,
        "status_reason": reason,
        "error_type": error_type,
        "attempts": attempts,
        "run_id": run_id,
        "updated_at": now,
        **spec_columns(setting),
    }
    if facts is not None:
        row.update(
            template_kind=facts.template_kind,
            n_problems=facts.n_problems,
            benchmark_n_problems=facts.benchmark_n_problems,
            benchmark_card_json=facts.card_json,
        )
    row.update(provenance or {})
    return row


def spec_columns(setting: SettingSpec) -> dict[str, Any]:
    """A setting's spec as settings-row columns: the model, the engine, the benchmark and the
    generation parameters, and its keyed fields as canonical JSON."""
    engine, model, decoding = setting.engine, setting.engine.model, setting.decoding
    return {
        "model_name": model.name,
        "model_repo_id": model.repo_id,
        "model_revision": model.revision,
        "model_family": model.family,
        "model_size_b": model.size_b,
        "model_tuning": model.tuning.value,
        "model_own_template": model.own_template,
        "backend": engine.backend,
        "claimed_backend": engine.claimed_backend,
        "dtype": engine.dtype.value,
        "quant": engine.quant.value,
        "bnb_4bit_quant_type": engine.bnb_4bit_quant_type.value,
        "precision": precision_label(engine.dtype, engine.quant),
        "benchmark": setting.benchmark.name,
        "variant": setting.benchmark.variant,
        "data_sha256": setting.benchmark.data_sha256,
        "limit": setting.benchmark.limit,
        "problems": _joined(setting.benchmark.problems),
        "template": setting.template,
        "decoding": decoding.name,
        "do_sample": decoding.do_sample,
        "temperature": decoding.temperature if decoding.do_sample else 0.0,
        "top_p": decoding.top_p,
        "top_k": decoding.top_k,
        "max_length": setting.max_length,
        "length_semantics": setting.length_semantics.value,
        "n_samples": setting.n_samples,
        "samples_per_call": setting.samples_per_call,
        "seed": setting.seed,
        "seed_policy": setting.seed_policy.value,
        "setting_json": canonical_json(setting_fields(setting)),
    }


def provenance_of(result: SettingGenerations, library_versions: str) -> dict[str, Any]:
    info = result.engine_info
    versions = {library: (version,) for library, version in info.backend_versions.items()}
    return {
        **engine_columns(
            versions,
            {
                "hostnames": (result.worker.hostname,),
                "node_ids": (result.worker.node_id,),
                "devices": (info.device or "",),
                "effective_dtypes": (info.effective_dtype,),
            },
        ),
        "tokenizer_sha256": info.tokenizer_sha256,
        "chat_template_sha256": info.chat_template_sha256,
        "engine_options_json": canonical_json(dict(info.options)),
        "library_versions_json": library_versions,
        "generation_s": result.generation_s,
        "generation_started_at": datetime.fromtimestamp(result.started_at, tz=UTC),
        "generation_finished_at": datetime.fromtimestamp(result.finished_at, tz=UTC),
        "engine_load_s": result.engine_load_s,
        "n_generated_tokens": output_tokens(result.samples),
    }


def output_tokens(samples: Sequence[SampleRecord]) -> int | None:
    """Output tokens of the samples; None when any count is unknown (replayed text)."""
    counts = [s.n_output_tokens for s in samples]
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


def generation_rows(
    key: str, samples: Sequence[SampleRecord], stream_state: bytes | None = None
) -> list[dict[str, Any]]:
    """One row per sample; `stream_state` (a chunk of a setting on the harness's global stream)
    goes on the last row: the stream after it, where the next chunk continues."""
    rows: list[dict[str, Any]] = [
        {
            "setting_key": key,
            "task_id": s.task_id,
            "sample_index": s.sample_index,
            "prompt": s.prompt,
            "continuation": s.continuation,
            "program": s.program,
            "n_prompt_tokens": s.n_prompt_tokens,
            "n_output_tokens": s.n_output_tokens,
            "prompt_truncated": s.prompt_truncated,
            "hit_length_limit": s.hit_length_limit,
            "output_token_ids": list(s.output_token_ids),
            "decode_mismatch": s.decode_mismatch,
            "seed": s.seed,
            "stream_state": None,
        }
        for s in samples
    ]
    if rows and stream_state is not None:
        rows[-1]["stream_state"] = stream_state
    return rows


def engine_columns(
    versions: Mapping[str, Sequence[str]], listed: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """The engine's provenance columns: its libraries and versions, and every host, node,
    device and effective dtype (`listed`, by list column), each as a structured column and its
    readable text (storage/provenance.py)."""
    values = {column: merged_values(listed[column]) for column in LISTED}
    return {
        VERSIONS_COLUMN: versions_json(versions),
        VERSIONS_TEXT_COLUMN: versions_text(versions),
        **{column: list(v) for column, v in values.items()},
        **{LISTED[column]: values_text(v) or None for column, v in values.items()},
    }


def kept_provenance(previous: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """The provenance `fields` an earlier run stored for a setting, kept by a run that only
    executes it again; a row written before schema version 6 gets its structured columns (and
    readable text from them: each library once)."""
    kept = {c: previous.get(c) for c in fields if previous.get(c) is not None}
    if VERSIONS_TEXT_COLUMN in kept and VERSIONS_COLUMN not in kept:
        listed = {c: values_of(previous, c) for c in LISTED}
        kept.update(engine_columns(versions_of(previous), listed))
    return kept


def merged_provenance(
    earlier: Mapping[str, Any] | None, chunk: SettingGenerations, library_versions: str
) -> dict[str, Any]:
    """A setting's provenance after one more chunk: times and tokens add up, the first start
    and the last finish stay, and every library version, host, node, device and dtype any
    chunk ran with is kept (each once), so nothing is claimed that held for only part of the
    setting. `earlier` may be a row written before schema version 6 (read back by
    storage/provenance.py)."""
    now = provenance_of(chunk, library_versions)
    if not earlier:
        return now
    merged = dict(now)
    for name in ("generation_s", "engine_load_s", "n_generated_tokens"):
        a, b = earlier.get(name), now.get(name)
        merged[name] = None if a is None or b is None else a + b
    if earlier.get("generation_started_at") is not None:
        merged["generation_started_at"] = earlier["generation_started_at"]
    versions = merged_versions(versions_of(earlier), versions_of(now))
    listed = {c: merged_values(values_of(earlier, c), values_of(now, c)) for c in LISTED}
    merged.update(engine_columns(versions, listed))
    return merged


def samples_from_rows(rows: Sequence[Mapping[str, Any]]) -> list[SampleRecord]:
    """Stored generations back into records (re-execution without re-generation)."""
    return [
        SampleRecord(
            task_id=r["task_id"],
            sample_index=r["sample_index"],
            prompt=r["prompt"],
            continuation=r["continuation"],
            program=r["program"],
            n_prompt_tokens=r["n_prompt_tokens"],
            n_output_tokens=r["n_output_tokens"],
            prompt_truncated=r["prompt_truncated"],
            hit_length_limit=r["hit_length_limit"],
            output_token_ids=tuple(r["output_token_ids"] or ()),
            seed=r["seed"],
            decode_mismatch=bool(r["decode_mismatch"]),
        )
        for r in rows
    ]


def execution_rows(key: str, records: Sequence[ExecutionRecord]) -> list[dict[str, Any]]:
    return [
        {
            "setting_key": key,
            "task_id": r.task_id,
            "sample_index": r.sample_index,
            "outcome": r.outcome.value,
            "passed": r.outcome is Outcome.PASSED,
            "score": r.score,
            "error_type": r.error_type,
            "error_message": r.error_message,
            "duration_s": r.duration_s,
            "details": r.details,
            "isolation": r.isolation,
        }
        for r in records
    ]


def score_row(
    key: str,
    setting: SettingSpec,
    generations: Sequence[Mapping[str, Any]],
    executions: Sequence[Mapping[str, Any]],
    summary: ScoreSummary | None = None,
) -> dict[str, Any]:
    """pass@k over problems (every problem counted, including those with no passing sample)
    and the exact counts behind it (workers/scoring.py). `summary` (a benchmark's own
    headline) replaces the pass@1 headline, e.g. InfiBench's best@10, and its per-problem
    scores; its details are merged into the row's `details`."""
    counts = setting_counts([r["task_id"] for r in executions], [r["passed"] for r in executions])
    row = {
        "setting_key": key,
        "benchmark": setting.benchmark.name,
        "metric": "pass@1",
        "value": counts.pass_at.get(1),
        "value_std": None,
        "n_problems": len(counts.counts.task_ids),
        "n_samples": setting.n_samples,
        **counts.columns(),
        "pass_at_1": counts.pass_at.get(1),
        "pass_at_10": counts.pass_at.get(10),
        "pass_at_100": counts.pass_at.get(100),
        **_flag_counts(generations, executions),
        "details": json.dumps(
            {"outcomes": _count(r["outcome"] for r in executions)}, sort_keys=True
        ),
        **_setting_copy(setting),
    }
    if summary is not None:
        details = json.loads(row["details"])
        details.update(json.loads(summary.details_json or "{}"))
        own = dict(summary.problem_scores)
        row.update(
            metric=summary.metric,
            value=summary.value,
            value_std=summary.value_std,
            n_problems=summary.n_problems,
            n_unscorable=summary.n_unscorable,
            details=json.dumps(details, sort_keys=True),
            problem_scores=[own[t] for t in row["problem_ids"]] if own else None,
        )
    return row


def _flag_counts(
    generations: Sequence[Mapping[str, Any]], executions: Sequence[Mapping[str, Any]]
) -> dict[str, int]:
    """Samples with a truncated prompt, a length-limit hit, a harness decode misalignment; and
    executions that timed out."""
    return {
        "n_prompt_truncated": sum(bool(g["prompt_truncated"]) for g in generations),
        "n_hit_length_limit": sum(bool(g["hit_length_limit"]) for g in generations),
        "n_decode_mismatch": sum(bool(g["decode_mismatch"]) for g in generations),
        "n_timeout": sum(r["outcome"] == Outcome.TIMEOUT.value for r in executions),
        "n_unscorable": 0,
    }


def _setting_copy(setting: SettingSpec) -> dict[str, Any]:
    """The setting's fields the scores table repeats, so that it reads on its own."""
    engine, decoding = setting.engine, setting.decoding
    return {
        "model_name": engine.model.name,
        "model_family": engine.model.family,
        "model_size_b": engine.model.size_b,
        "model_tuning": engine.model.tuning.value,
        "backend": engine.backend,
        "dtype": engine.dtype.value,
        "quant": engine.quant.value,
        "precision": precision_label(engine.dtype, engine.quant),
        "variant": setting.benchmark.variant,
        "template": setting.template,
        "decoding": decoding.name,
        "temperature": decoding.temperature if decoding.do_sample else 0.0,
        "max_length": setting.max_length,
        "length_semantics": setting.length_semantics.value,
        "seed": setting.seed,
        "limit": setting.benchmark.limit,
        "problems": _joined(setting.benchmark.problems),
    }


def _joined(problems: Sequence[str] | None) -> str | None:
    return ",".join(problems) if problems is not None else None


def _count(values) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for v in values:
        out[str(v)] += 1
    return dict(out)
