"""HumanEvalFix's definition: variants, templates, skip rules and loading (the registry entry)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workers.benchmarks.base import BenchmarkDataError, BenchmarkSource
from workers.benchmarks.humanevalfix.adapter import HumanEvalFix
from workers.benchmarks.humanevalfix.data import DatasetError, load_hub, load_jsonl
from workers.benchmarks.humanevalfix.prompts import CHAT_TEMPLATE, DIFF_TEMPLATES, HARNESS_TEMPLATES
from workers.card import BenchmarkCard, LiteratureFormat, MatchRule
from workers.spec import ModelSpec, SettingSpec, Variant

HUMANEVALPACK_FILE = "humanevalpack-python.jsonl"  # under the data folder (source=local)
DIFF_REASON = "diff templates emit patches that the harness applies externally; not scored"
OWN = "own"
N_PROBLEMS = 164  # HumanEvalPack Python
CARD = BenchmarkCard(
    benchmark="humanevalfix",
    title="HumanEvalFix-Python",
    dataset="HumanEvalPack",  # its Python split's HumanEvalFix task (fix the buggy function)
    dataset_id="bigcode/humanevalpack",
    dataset_split="test",
    metric="pass@1",
    metric_description="pass@1: unbiased estimator over each problem's samples, mean over "
    "problems; programs run as the BigCode harness's metric runs them",
    graded=False,
    n_problems=N_PROBLEMS,
    unit="problem",
    literature="reprogrid:humanevalfix-python.csv",  # pass@1 values papers report
    literature_format=LiteratureFormat.PAPERS,
    literature_source_id="",
    literature_title="",
    mapping="reprogrid:humanevalfix-mapping.yaml",
    reported_variants=(Variant.TESTS.value,),  # papers report HumanEvalFixTests
    match_rule=MatchRule.EXACT_COUNT,
    semantics="bigcode-evaluation-harness",
)


@dataclass(frozen=True)
class HumanEvalFixDefinition:
    name: str = "humanevalfix"
    variants: tuple[str, ...] = tuple(v.value for v in Variant)
    # "own": the harness template of the model's family (ModelSpec.own_template).
    templates: tuple[str, ...] = (OWN, CHAT_TEMPLATE, *HARNESS_TEMPLATES)
    card: BenchmarkCard = CARD

    def template_note(self, template: str) -> str | None:
        if template == "continue":  # the harness asserts it is for HumanEvalSynthesize only
            return (
                "template 'continue' is only for HumanEvalSynthesize (the harness asserts); use "
                "'instruct' for HumanEvalFix."
            )
        return None

    def resolve_template(self, template: str, model: ModelSpec) -> str:
        return model.own_template if template == OWN else template

    def template_kind(self, template: str, model: ModelSpec) -> str:
        return OWN if template == model.own_template else template

    def skip_reason(self, setting: SettingSpec) -> str | None:
        if setting.template in DIFF_TEMPLATES:
            return DIFF_REASON
        return None

    def load(self, source: BenchmarkSource) -> HumanEvalFix:
        try:
            if source.source == "hub":
                problems = load_hub(source.hub_revision, cache_dir=source.cache_dir)
            elif source.source == "local":
                if not source.data_dir:
                    raise BenchmarkDataError("no data folder configured (paths.data_dir)")
                problems = load_jsonl(Path(source.data_dir) / HUMANEVALPACK_FILE)
            else:
                problems = load_jsonl(source.source)
        except DatasetError as e:
            raise BenchmarkDataError(str(e)) from e
        return HumanEvalFix(problems)


HUMANEVALFIX = HumanEvalFixDefinition()
