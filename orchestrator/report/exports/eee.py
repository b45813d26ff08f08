"""Store rows and literature rows as Every Eval Ever records (EvalEval Coalition, schema 0.3.0).

Pure functions of rows: one `EvaluationLog` (an aggregate record) per scored setting, and one
per literature value, each with the datastore path the schema's validator expects
(`data/<benchmark>/<developer>/<model>/<uuid>.json`). Ids and file names derive from the
setting key (or the literature row), so exporting the same store twice writes the same files.
Where each store column goes, and what the schema cannot hold, is in docs/install.md
("Results in the Every Eval Ever format"); report/exports/eee_export.py reads and writes.

What a record says about its benchmark (the dataset, the headline metric and how it is computed,
whose scoring it follows) comes from the benchmark's card (workers/card.py) stored with the
setting; a setting written before cards were stored takes today's (`EeeOptions.card_of`).

A pilot (a setting over part of its benchmark's problems, e.g. `benchmark.limit=10`) is marked
where consumers read it: its `evaluation_name` says "subset: 10 of 164 problems", its
Hugging Face `source_data` lists the problems scored (`sample_ids`, the schema's field for the
samples used) beside `samples_number`, and `source_data.additional_details.subset` holds the
same text. `EeeOptions.pilots=False` leaves pilots out altogether.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.analysis.intervals import bootstrap_interval
from orchestrator.report.choices import EvaluatorRelationship
from orchestrator.report.exports.eeefields import (
    epoch,
    metric_config,
    model_identity,
    present,
    record_path,
    source_data,
    strings,
    subset,
)
from orchestrator.report.exports.eeeschema import (
    EvaluationLog,
    EvaluationResult,
    GenerationConfig,
    ModelInfo,
    ScoreDetails,
    Uncertainty,
)
from orchestrator.report.tables.data import CardLookup
from orchestrator.report.tables.scored import Scored
from storage.provenance import LISTED, engine_version, values_of, values_text
from workers.card import BenchmarkCard, card_from_json

SCHEMA_VERSION = "0.3.0"  # every_eval_ever.schema.get_schema_version() of the validated release
LIBRARY = "reprogrid"
SCORE_METRICS = (("pass@1", "pass_at_1"), ("pass@10", "pass_at_10"), ("pass@100", "pass_at_100"))
# Columns that travel as strings in the schema's `additional_details` (what makes the setting:
# generation_config; the counts behind a score: score_details).
SETTING_DETAILS = (
    "setting_key",
    "engine_key",
    "setting_json",
    "template",
    "template_kind",
    "model_own_template",
    "decoding",
    "do_sample",
    "max_length",
    "length_semantics",
    "n_samples",
    "samples_per_call",
    "seed",
    "seed_policy",
    "backend",
    "claimed_backend",
    "dtype",
    "quant",
    "bnb_4bit_quant_type",
    "precision",
    "effective_dtype",
    "engine_options_json",
)
SCORE_DETAILS = (
    "n_problems",
    "n_samples",
    "n_passed",
    "n_prompt_truncated",
    "n_hit_length_limit",
    "n_decode_mismatch",
    "n_timeout",
    "n_unscorable",
    "details",
)
MODEL_DETAILS = (
    "model_repo_id",
    "model_revision",
    "model_family",
    "model_size_b",
    "model_tuning",
    "tokenizer_sha256",
    "chat_template_sha256",
)
PROVENANCE = (
    "setting_key",
    "run_id",
    "status",
    "attempts",
    "hostname",
    "node_id",
    "device",
    "library_versions_json",
    "generation_s",
    "engine_load_s",
)
RUN_PROVENANCE = ("git_revision", "cluster_address", "data_sources_json")


@dataclass(frozen=True)
class EeeOptions:
    organization: str = "reprogrid"  # source_organization_name: who provides the records
    relationship: EvaluatorRelationship = EvaluatorRelationship.THIRD_PARTY
    confidence: float = 0.95  # pass@1 bootstrap interval over problems (as the report)
    n_resamples: int = 10_000
    seed: int = 0
    pilots: bool = True  # False: settings over a subset of the problems are left out
    card_of: CardLookup | None = None  # a card for settings stored without one (None: none)
    # A backend's name as an inference engine (its definition's `export_name`, given by the
    # command line); a backend without one is called by its own name.
    engine_names: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EeeRecord:
    path: str  # data/<benchmark>/<developer>/<model>/<uuid>.json, relative to the export root
    log: EvaluationLog


def generation_config(
    setting: Mapping[str, Any], run: Mapping[str, Any] | None
) -> GenerationConfig:
    """The setting's sampling and length as the schema's arguments; everything else that makes
    the setting (its key included) in `additional_details`."""
    args: dict[str, Any] = {}
    for name in ("temperature", "top_p", "top_k"):
        if present(setting.get(name)):
            args[name] = float(setting[name]) if name != "top_k" else int(setting[name])
    # max_tokens is "tokens to generate": only a new-token limit is one.
    if setting.get("length_semantics") == "new_tokens" and present(setting.get("max_length")):
        args["max_tokens"] = int(setting["max_length"])
    if run is not None and present(run.get("command")):
        overrides = json.loads(run["overrides_json"]) if present(run.get("overrides_json")) else []
        args["execution_command"] = shlex.join([LIBRARY, str(run["command"]), *overrides])
    details = strings({name: setting.get(name) for name in SETTING_DETAILS})
    return {"generation_args": args, "additional_details": details}


def _score_details(
    score: Mapping[str, Any],
    value: float,
    measured: Scored | None,
    options: EeeOptions,
    headline: bool,
) -> ScoreDetails:
    details = strings({name: score.get(name) for name in SCORE_DETAILS})
    uncertainty: Uncertainty = {}
    if present(score.get("n_problems")):
        uncertainty["num_samples"] = int(score["n_problems"])
    if headline and present(score.get("value_std")):
        uncertainty["standard_deviation"] = float(score["value_std"])
    if headline and measured is not None and measured.problem_scores:
        interval = bootstrap_interval(
            measured.problem_scores, options.n_resamples, options.confidence, options.seed
        )
        uncertainty["confidence_interval"] = {
            "lower": interval.low,
            "upper": interval.high,
            "confidence_level": options.confidence,
            "method": "percentile bootstrap over problems",
        }
        uncertainty["num_bootstrap_samples"] = options.n_resamples
    out: ScoreDetails = {"score": value, "details": details}
    if uncertainty:
        out["uncertainty"] = uncertainty
    return out


def _results(
    score: Mapping[str, Any],
    setting: Mapping[str, Any],
    run: Mapping[str, Any] | None,
    measured: Scored | None,
    options: EeeOptions,
    card: BenchmarkCard,
) -> list[EvaluationResult]:
    candidates: dict[str, Any] = {str(score["metric"]): score.get("value")}
    for name, column in SCORE_METRICS:
        candidates.setdefault(name, score.get(column))
    # A metric the setting has no value for (pass@10 with fewer samples) is left out.
    metrics = {m: float(v) for m, v in candidates.items() if present(v) and math.isfinite(v)}
    benchmark = str(score.get("benchmark"))
    data = {n: setting.get(n) for n in ("variant", "data_sha256", "limit", "benchmark_n_problems")}
    pilot = subset(setting, score.get("n_problems"))
    counts = measured.counts if measured is not None else None
    ids = counts.task_ids if counts is not None else ()
    source = source_data(card, score.get("n_problems"), data, pilot, ids)
    name = f"{benchmark}/{setting.get('variant')}"
    if pilot is not None:  # a pilot is not the benchmark's evaluation: its name says so
        name += f" (subset: {pilot} {card.unit}s)"
    generation = generation_config(setting, run)
    results: list[EvaluationResult] = []
    for metric, value in metrics.items():
        headline = metric == score["metric"]
        results.append(
            {
                "evaluation_result_id": metric,
                "evaluation_name": name,
                "source_data": source,
                "metric_config": metric_config(metric, card),
                "score_details": _score_details(score, value, measured, options, headline),
                "generation_config": generation,
            }
        )
    return results


def _provenance(setting: Mapping[str, Any], run: Mapping[str, Any] | None) -> dict[str, str]:
    """Where and how the setting was run: the source's `additional_details`."""
    run = run or {}
    values = {name: setting.get(name) for name in PROVENANCE}
    # hosts, nodes, devices: each once, from the structured values (older rows' text read back)
    listed = {flat: values_of(setting, column) for column, flat in LISTED.items()}
    values |= {flat: values_text(v) or None for flat, v in listed.items() if flat in values}
    values |= {name: run.get(name) for name in RUN_PROVENANCE}
    return strings({**values, "run_started_at": epoch(run.get("started_at"))})


def _model_info(
    setting: Mapping[str, Any], engine_names: Mapping[str, str]
) -> tuple[ModelInfo, str | None]:
    name = str(setting.get("model_name"))
    model_id, developer = model_identity(
        setting.get("model_repo_id"), name, setting.get("model_family")
    )
    backend = str(setting.get("backend"))
    name = engine_names.get(backend, backend)
    # the engine's own library's version (transformers' for hf), not every library it ran with
    engine = {"name": name, "version": engine_version(setting, name)}
    claimed = setting.get("claimed_backend")
    if present(claimed):  # an imported file: the engine it claims; its version is not known
        engine = {"name": engine_names.get(str(claimed), str(claimed))}
    details = {"deployment_type": "self_deployed", "model_availability": "open_weights"}
    info: ModelInfo = {
        "name": name,
        "id": model_id,
        "inference_platform": "local",
        "inference_engine": strings(engine),
        "additional_details": details | strings({n: setting.get(n) for n in MODEL_DETAILS}),
    }
    if developer is not None:
        info["developer"] = developer
    return info, developer


def _library_version(setting: Mapping[str, Any]) -> str:
    versions = setting.get("library_versions_json")
    if isinstance(versions, str):
        return str(json.loads(versions).get(LIBRARY, "unknown"))
    return "unknown"


def setting_card(setting: Mapping[str, Any], options: EeeOptions) -> BenchmarkCard:
    """The card stored with the setting, else today's (`options.card_of`). Raises ValueError
    when there is none: a record must say what its benchmark is."""
    stored = setting.get("benchmark_card_json")
    if isinstance(stored, str) and stored:
        return card_from_json(stored)
    card = options.card_of(str(setting.get("benchmark"))) if options.card_of else None
    if card is None:
        raise ValueError(
            f"setting {str(setting.get('setting_key'))[:12]} of benchmark "
            f"{setting.get('benchmark')!r} carries no benchmark card and none is known"
        )
    return card


def score_log(
    score: Mapping[str, Any],
    setting: Mapping[str, Any],
    run: Mapping[str, Any] | None,
    measured: Scored | None,
    options: EeeOptions,
) -> EeeRecord:
    """One scored setting (its `scores` row, `settings` row and the run that last wrote it;
    `measured`: its counts, for the headline's interval over problems) as an EvaluationLog."""
    card = setting_card(setting, options)
    model, developer = _model_info(setting, options.engine_names)
    evaluation_id = f"{score['benchmark']}/{model['id']}/{score['setting_key']}"
    log: EvaluationLog = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "retrieved_timestamp": epoch(setting.get("updated_at")) or "0",
        "source_metadata": {
            "source_name": LIBRARY,
            "source_type": "evaluation_run",
            "source_organization_name": options.organization,
            "evaluator_relationship": options.relationship.value,
            "additional_details": _provenance(setting, run),
        },
        "eval_library": {
            "name": LIBRARY,
            "version": _library_version(setting),
            "additional_details": {"semantics": card.semantics},
        },
        "model_info": model,
        "evaluation_results": _results(score, setting, run, measured, options, card),
    }
    finished = epoch(setting.get("generation_finished_at"))
    if finished:
        log["evaluation_timestamp"] = finished
    return EeeRecord(
        record_path(str(score["benchmark"]), model["id"], developer, evaluation_id), log
    )


def score_logs(
    scores: Sequence[Mapping[str, Any]],
    settings: Sequence[Mapping[str, Any]],
    runs: Sequence[Mapping[str, Any]],
    measured: Mapping[str, Scored],
    options: EeeOptions,
) -> list[EeeRecord]:
    """Every `scores` row with its setting as a record, in setting-key order. A score whose
    setting row is missing is left out (the store has nothing to say about how it was made),
    and so is a pilot's unless `options.pilots`."""
    by_key = {s["setting_key"]: s for s in settings}
    run_by_id = {r["run_id"]: r for r in runs}
    out = []
    for score in sorted(scores, key=lambda s: s["setting_key"]):
        setting = by_key.get(score["setting_key"])
        if setting is None:
            continue
        if not options.pilots and subset(setting, score.get("n_problems")) is not None:
            continue
        run = run_by_id.get(setting.get("run_id"))
        out.append(score_log(score, setting, run, measured.get(score["setting_key"]), options))
    return out
