"""The fields every Every Eval Ever record of reprogrid shares, store scores and literature
values alike: missing values, details as strings, timestamps, the record's id and path, the
model's id, a pilot's subset, the dataset (`source_data`) and a metric (`metric_config`) as the
benchmark's card describes them. Pure."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from orchestrator.report.exports.eeeschema import MetricConfig, SourceData
from workers.card import BenchmarkCard

_HF_ID = re.compile(r"[A-Za-z0-9][\w.\-]*/[\w.\-]+")


def present(value: Any) -> bool:
    """Not a missing value (None, NaN, NaT)."""
    return value is not None and value == value


def text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def strings(values: Mapping[str, Any]) -> dict[str, str]:
    """The schema's `additional_details`: string values only, missing values left out."""
    return {k: text(v) for k, v in values.items() if present(v)}


def epoch(value: Any) -> str | None:
    """The schema's timestamps: Unix seconds as a string."""
    return str(int(value.timestamp())) if isinstance(value, datetime) and present(value) else None


def record_uuid(evaluation_id: str) -> str:
    """A version-4-shaped UUID derived from the id: stable file names across exports."""
    return str(uuid.UUID(bytes=hashlib.sha256(evaluation_id.encode()).digest()[:16], version=4))


def safe_component(name: str) -> str:
    """A portable datastore path component (the validator rejects these characters)."""
    cleaned = re.sub(r'[<>:"\\|?*/\x00-\x1f]', "_", name.strip()).rstrip(". ")
    return cleaned if cleaned and cleaned.lower() not in ("data", "unknown") else f"_{cleaned}"


def model_identity(repo_id: Any, model_name: str, family: Any) -> tuple[str, str | None]:
    """The schema's model id (Hugging Face `org/name`) and, for a flat id, its developer."""
    if isinstance(repo_id, str) and _HF_ID.fullmatch(repo_id):
        return repo_id, None
    developer = family if isinstance(family, str) and family.strip() else "local"
    # A flat id has no "/": the datastore reads a slash as developer/model.
    return model_name.replace("/", "_"), developer


def record_path(benchmark: str, model_id: str, developer: str | None, evaluation_id: str) -> str:
    owner, _, name = model_id.partition("/") if developer is None else (developer, "", model_id)
    parts = [safe_component(benchmark), safe_component(owner), safe_component(name)]
    return "/".join(["data", *parts, f"{record_uuid(evaluation_id)}.json"])


def subset(setting: Mapping[str, Any], n_problems: Any) -> str | None:
    """ "10 of 164" when the setting scored fewer problems than its benchmark holds ("limit 10"
    where an older store did not record the total), else None: not a pilot."""
    total: Any = setting.get("benchmark_n_problems")
    if present(total) and present(n_problems) and int(n_problems) < int(total):
        return f"{int(n_problems)} of {int(total)}"
    if not present(total) and present(setting.get("limit")):
        return f"limit {int(setting['limit'])}"
    return None


def _dataset_order(task_id: str) -> tuple[str, int]:
    """ "Python/2" before "Python/10" (the benchmark's order, by the numeric suffix)."""
    match = re.search(r"(\d+)$", task_id)
    return (task_id[: match.start()], int(match.group(1))) if match else (task_id, -1)


def source_data(
    card: BenchmarkCard,
    n_problems: Any,
    details: Mapping[str, Any],
    pilot: str | None = None,
    task_ids: Sequence[str] = (),
) -> SourceData:
    """The schema's `source_data`: the card's dataset, as a Hugging Face source where it is
    one. A pilot's (`pilot`: its subset) lists the problems it scored as `sample_ids`."""
    # the keys in the order the records have always had them (additional_details last)
    source: dict[str, Any] = {"dataset_name": card.dataset, "source_type": "other"}
    if card.dataset_id is not None:
        source = {
            "dataset_name": card.dataset,
            "source_type": "hf_dataset",
            "hf_repo": card.dataset_id,
            "hf_split": card.dataset_split,
        }
    if present(n_problems):
        source["samples_number"] = int(n_problems)
    if pilot is not None and source["source_type"] == "hf_dataset" and task_ids:
        source["sample_ids"] = sorted(task_ids, key=_dataset_order)
    extra = strings({"benchmark": card.benchmark, **details, "subset": pilot})
    return cast(SourceData, {**source, "additional_details": extra})


def metric_config(metric: str, card: BenchmarkCard) -> MetricConfig:
    """The schema's `metric_config` of one metric of a setting: its headline as the card
    describes it, or a pass@k (of a graded benchmark: a sample passes at full score)."""
    k = int(metric.split("@")[1])
    graded = card.graded and metric == card.metric
    if metric == card.metric:
        description = card.metric_description
    else:
        description = f"pass@{k}: unbiased estimator over each {card.unit}'s samples, mean over "
        description += f"{card.unit}s"
        if card.graded:
            description += "; a sample passes when it earns the full score"
    return {
        "metric_id": f"{card.benchmark}.best_at_k" if graded else "pass_at_k",
        "metric_kind": "score" if graded else "pass_rate",
        "evaluation_description": f"{description} ({card.semantics})",
        "metric_name": metric,
        "metric_unit": "proportion",
        "metric_parameters": {"k": k},
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0.0,
        "max_score": 1.0,
    }
