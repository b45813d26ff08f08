"""The report's output formats and the export's closed option sets, in a module of their own:
the command line names them in its help without importing the renderers and exporters (pandas
and matplotlib cost about a second at every start, `status` included)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

FORMATS = ("md", "csv", "tex", "html", "json")


def parse_formats(text: str | Sequence[str]) -> list[str]:
    items = text.split(",") if isinstance(text, str) else [f for t in text for f in t.split(",")]
    formats = [f.strip() for f in items if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(
            f"Unknown report format(s) {', '.join(bad) or '(none)'}. Valid: {', '.join(FORMATS)}"
        )
    return formats


class ExportFormat(StrEnum):
    EEE = "eee"  # Every Eval Ever (EvalEval Coalition), schema 0.3.0
    MLFLOW = "mlflow"  # one MLflow run per setting, one experiment per store (mlflow_runs.py)


class EvaluatorRelationship(StrEnum):
    """The schema's `evaluator_relationship`: who ran the evaluation, against the model."""

    FIRST_PARTY = "first_party"
    THIRD_PARTY = "third_party"
    COLLABORATIVE = "collaborative"
    OTHER = "other"
