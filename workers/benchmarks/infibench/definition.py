"""InfiBench's definition: suites, templates and loading (the registry entry)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workers.benchmarks.base import BenchmarkDataError, BenchmarkSource
from workers.benchmarks.infibench.adapter import TEMPLATES, InfiBench
from workers.benchmarks.infibench.suite import (
    SuiteError,
    load_dev_suite,
    load_packed_suite,
    load_suite,
)
from workers.spec import ModelSpec, SettingSpec

SUITES = ("v2.1", "dev")  # v2.1: the 234-question suite; dev: the v2.0.0 dev suite (135)
DATA_FOLDER = "infibench"  # under the data folder (source=local)
OWN = "own"
# The model authors' own format for a free-form question is the tokenizer's chat template.
OWN_TEMPLATE = "chat"


@dataclass(frozen=True)
class InfiBenchDefinition:
    name: str = "infibench"
    variants: tuple[str, ...] = SUITES
    templates: tuple[str, ...] = (OWN, *TEMPLATES)

    def template_note(self, template: str) -> str | None:
        return None

    def resolve_template(self, template: str, model: ModelSpec) -> str:
        return OWN_TEMPLATE if template == OWN else template

    def template_kind(self, template: str, model: ModelSpec) -> str:
        return OWN if template == OWN_TEMPLATE else template

    def skip_reason(self, setting: SettingSpec) -> str | None:
        return None

    def load(self, source: BenchmarkSource) -> InfiBench:
        """`local`: <data_dir>/infibench (variant v2.1, or dev); otherwise a suite folder (with
        suite_v2.1.yaml) or a packed CSV path."""
        try:
            if source.source == "local":
                if not source.data_dir:
                    raise BenchmarkDataError("no data folder configured (paths.data_dir)")
                folder = Path(source.data_dir) / DATA_FOLDER
                if source.variant not in SUITES:
                    raise BenchmarkDataError(
                        f"Unknown InfiBench suite {source.variant!r}. Valid: {', '.join(SUITES)}"
                    )
                suite = load_dev_suite(folder) if source.variant == "dev" else load_suite(folder)
            elif source.source == "hub":
                raise BenchmarkDataError(
                    "InfiBench from the Hub is not supported offline; download the packed CSV "
                    "(llylly001/InfiBench) and pass benchmark.source=<path to the CSV>"
                )
            elif source.source.endswith(".csv"):
                suite = load_packed_suite(source.source)
            else:
                suite = load_suite(source.source)
        except SuiteError as e:
            raise BenchmarkDataError(str(e)) from e
        return InfiBench(suite)


INFIBENCH = InfiBenchDefinition()
