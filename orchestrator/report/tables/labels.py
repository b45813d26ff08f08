"""A setting's axes, label and place in the grid's order, as the problems view, `show` and the
MLflow runs name it: one place for all three (the report's tables label a setting with
`grid.setting_label`, the short form without the samples and the variant). Light: no pandas
(the view's batches import it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.analysis.effects import template_kind

# Precisions from the least to the most compressed: their order in every table and the view.
PRECISION_RANK = {"bf16": 0, "fp16": 1, "fp32": 2, "int8": 3, "int4": 4}
# The axes a setting is shown and filtered by, in the order of the problems view's header rows.
AXES = ("benchmark", "variant", "template", "decoding", "max_length", "precision", "backend")
SHOWN_AXES = (*AXES, "n_samples")


def _present(value: Any) -> bool:
    return value is not None and value == value  # NaN is not equal to itself


def _template(row: Mapping[str, Any]) -> str:
    """ "own(deepseek)" for the model's own template, else the template's name."""
    kind = row.get("template_kind")
    kind = str(kind) if _present(kind) else template_kind(str(row["template"]), None)
    return f"own({row['template']})" if kind == "own" else str(row["template"])


def setting_axes(row: Mapping[str, Any]) -> dict[str, Any]:
    axes = {a: row.get(a) for a in SHOWN_AXES}
    axes["template"] = _template(row)
    axes["max_length"] = int(row["max_length"]) if _present(row.get("max_length")) else None
    axes["n_samples"] = int(row["n_samples"]) if _present(row.get("n_samples")) else 1
    return axes


def _order(row: Mapping[str, Any]) -> tuple:
    axes = setting_axes(row)
    own = not str(axes["template"]).startswith("own(")
    return (
        str(axes["benchmark"]),
        str(axes["variant"]),
        own,
        str(axes["template"]),
        str(axes["decoding"]),
        axes["max_length"] or 0,
        PRECISION_RANK.get(str(axes["precision"]), 9),
        str(axes["backend"]),
        axes["n_samples"],
        row["setting_key"],
    )


def ordered_settings(settings: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Settings in the grid's order: own template first, decoding, max length, precision bf16
    -> int4, backend (the report's order), within benchmark and variant."""
    return sorted(settings, key=_order)


def axes_label(axes: Mapping[str, Any]) -> str:
    """`setting_axes` as one line: "own(deepseek) greedy 2048 bf16 hf", then the samples per
    problem and the variant where they are not the default."""
    parts = [axes["template"], axes["decoding"], axes["max_length"], axes["precision"]]
    label = " ".join(str(p) for p in [*parts, axes["backend"]])
    extra = [] if axes["n_samples"] == 1 else [f"n={axes['n_samples']}"]
    if axes["variant"] not in (None, "tests"):
        extra.append(str(axes["variant"]))
    return " ".join([label, *extra])
