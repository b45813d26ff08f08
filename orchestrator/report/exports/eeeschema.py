"""The parts of an Every Eval Ever `EvaluationLog` (schema 0.3.0) that reprogrid writes, as
types: what a record holds is checked by the type checker here and by the schema's own
validator in the tests (tests/unit/orchestrator/report/exports/test_eee.py)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class SourceData(TypedDict):
    dataset_name: str
    source_type: str  # "hf_dataset" or "other"
    hf_repo: NotRequired[str]
    hf_split: NotRequired[str | None]
    samples_number: NotRequired[int]
    sample_ids: NotRequired[list[str]]  # a pilot's problems
    additional_details: dict[str, str]


class MetricConfig(TypedDict):
    metric_id: str
    metric_kind: str
    evaluation_description: str
    metric_name: str
    metric_unit: str
    metric_parameters: dict[str, int]
    lower_is_better: bool
    score_type: str
    min_score: float
    max_score: float


class ConfidenceInterval(TypedDict):
    lower: float
    upper: float
    confidence_level: float
    method: str


class Uncertainty(TypedDict, total=False):
    num_samples: int
    standard_deviation: float
    confidence_interval: ConfidenceInterval
    num_bootstrap_samples: int


class ScoreDetails(TypedDict):
    score: float
    details: dict[str, str]
    uncertainty: NotRequired[Uncertainty]


class GenerationConfig(TypedDict):
    generation_args: dict[str, Any]  # temperature, top_p, top_k, max_tokens, execution_command
    additional_details: dict[str, str]


class EvaluationResult(TypedDict):
    evaluation_result_id: str
    evaluation_name: str
    source_data: SourceData
    metric_config: MetricConfig
    score_details: ScoreDetails
    generation_config: GenerationConfig


class ModelInfo(TypedDict):
    name: str
    id: str
    developer: NotRequired[str]
    inference_platform: NotRequired[str]
    inference_engine: NotRequired[dict[str, str]]  # name, and version where known
    additional_details: dict[str, str]


class SourceMetadata(TypedDict):
    source_name: str
    source_type: str  # "evaluation_run" or "documentation"
    source_organization_name: str
    source_organization_url: NotRequired[str]
    evaluator_relationship: str
    additional_details: dict[str, str]


class EvalLibrary(TypedDict):
    name: str
    version: str
    additional_details: dict[str, str]


class EvaluationLog(TypedDict):
    schema_version: str
    evaluation_id: str
    retrieved_timestamp: str
    evaluation_timestamp: NotRequired[str]
    source_metadata: SourceMetadata
    eval_library: EvalLibrary
    model_info: ModelInfo
    evaluation_results: list[EvaluationResult]
