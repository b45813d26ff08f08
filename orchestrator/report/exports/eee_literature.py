"""The literature table as Every Eval Ever records: one `documentation` record per value a
paper or leaderboard reports (schema 0.3.0, the same shape as report/exports/eee.py's store
records), described by the benchmark's card (its dataset, headline metric and semantics).

The score is the printed percentage as a proportion; the text as printed ("44.9") travels in
`score_details.details`, because its decimals decide which k/n could have produced it; a
leaderboard's spread over repeated runs travels beside it (and as the standard deviation where
it was measured over two or more groups). A
literature model name maps to a configured model (the mapping file) and from there to its Hugging
Face id where one is known (the store's settings, or the model's config through the caller);
otherwise the record names the model as printed, under its family as developer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from decimal import Decimal

from orchestrator.report.exports.eee import SCHEMA_VERSION, EeeRecord
from orchestrator.report.exports.eeefields import (
    metric_config,
    model_identity,
    record_path,
    source_data,
    strings,
)
from orchestrator.report.exports.eeeschema import (
    EvaluationLog,
    EvaluationResult,
    ModelInfo,
    SourceMetadata,
    Uncertainty,
)
from storage.literature import LiteratureMapping, LiteratureRow
from workers.card import BenchmarkCard


def source_url(source_id: str) -> str | None:
    """A link for the usual identifiers (arXiv:..., doi:...)."""
    kind, _, value = source_id.partition(":")
    if kind.lower() == "arxiv" and value:
        return f"https://arxiv.org/abs/{value}"
    if kind.lower() == "doi" and value:
        return f"https://doi.org/{value}"
    return None


def _row_id(row: LiteratureRow) -> str:
    """What identifies a reported value: every field but its line in the file."""
    fields = {k: v for k, v in asdict(row).items() if k != "line"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _uncertainty(row: LiteratureRow, card: BenchmarkCard, n_problems: int) -> Uncertainty:
    out: Uncertainty = {"num_samples": n_problems}
    groups = (row.n_samples or 0) // card.k
    if row.spread_text and groups >= 2:  # one group reports 0: no spread was measured
        out["standard_deviation"] = float(Decimal(row.spread_text) / 100)
    return out


def _result(
    row: LiteratureRow, mapping: LiteratureMapping, card: BenchmarkCard
) -> EvaluationResult:
    variants = ",".join(mapping.variants or card.reported_variants)
    n_problems = mapping.n_problems or card.n_problems
    return {
        "evaluation_result_id": card.metric,
        "evaluation_name": f"{card.benchmark}/{variants}",
        "source_data": source_data(card, n_problems, {"variant": variants}),
        "metric_config": metric_config(card.metric, card),
        "score_details": {
            "score": float(Decimal(row.score_text) / 100),
            "details": strings(
                {
                    "score_pct_as_printed": row.score_text,
                    "decimals": row.decimals,
                    "n_samples": row.n_samples,
                    "std_pct_as_printed": row.spread_text or None,
                }
            ),
            "uncertainty": _uncertainty(row, card, n_problems),
        },
        # What the paper says about its setting is free text: the schema's arguments stay empty.
        "generation_config": {
            "generation_args": {},
            "additional_details": strings(
                {"setting_notes": row.setting_notes, "n_samples": row.n_samples}
            ),
        },
    }


def literature_log(
    row: LiteratureRow,
    mapping: LiteratureMapping,
    card: BenchmarkCard,
    repo_ids: Mapping[str, str],
    retrieved_at: int,
) -> EeeRecord:
    """One reported value of `card`'s benchmark as an EvaluationLog (`retrieved_at`: Unix
    seconds of the export)."""
    configured = mapping.models.get(row.model)
    model_id, developer = model_identity(
        repo_ids.get(configured or ""), row.model, row.model_family
    )
    evaluation_id = f"{card.benchmark}/{model_id}/literature/{_row_id(row)}"
    log: EvaluationLog = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "retrieved_timestamp": str(retrieved_at),
        "source_metadata": _source(row, mapping, configured),
        "eval_library": {
            "name": "unknown",
            "version": "unknown",
            "additional_details": {"recorded_by": "reprogrid literature table"},
        },
        "model_info": _model(row, model_id, developer, configured),
        "evaluation_results": [_result(row, mapping, card)],
    }
    return EeeRecord(record_path(card.benchmark, model_id, developer, evaluation_id), log)


def _model(
    row: LiteratureRow, model_id: str, developer: str | None, configured: str | None
) -> ModelInfo:
    model: ModelInfo = {
        "name": row.model,
        "id": model_id,
        "additional_details": {"deployment_type": "unknown", "model_availability": "unknown"}
        | strings(
            {
                "model_family": row.model_family,
                "model_size_b": row.size_b,
                "model_tuning": row.tuning,
                "configured_model": configured,
            }
        ),
    }
    if developer is not None:
        model["developer"] = developer
    return model


def _source(
    row: LiteratureRow, mapping: LiteratureMapping, configured: str | None
) -> SourceMetadata:
    source: SourceMetadata = {
        "source_name": row.source_title or row.source_id,
        "source_type": "documentation",
        "source_organization_name": row.source_id,
        # The table does not say whether a paper's authors made the model they report.
        "evaluator_relationship": "other",
        "additional_details": strings(
            {
                "source_id": row.source_id,
                "table_or_location": row.table_or_location,
                "found_via": row.found_via,
                "literature_model": row.model,
                "mapping": "mapped" if configured else "unmapped",
                "mapping_file": mapping.source,
            }
        ),
    }
    if url := source_url(row.source_id):
        source["source_organization_url"] = url
    return source


def literature_logs(
    rows: Sequence[LiteratureRow],
    mapping: LiteratureMapping,
    card: BenchmarkCard,
    repo_ids: Mapping[str, str],
    retrieved_at: int,
) -> list[EeeRecord]:
    """Every literature row of `card`'s benchmark as a record, in file order; `repo_ids` maps
    configured model names to their Hugging Face ids."""
    return [literature_log(row, mapping, card, repo_ids, retrieved_at) for row in rows]
