"""A third benchmark, as small as the contract allows: two arithmetic problems whose "program"
is the model's text, passed when it equals the answer. Registered by test_registry.py to show
that the driver needs nothing but the registry line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workers.benchmarks.base import BenchmarkSource, ChatRenderer, ScoreSummary
from workers.benchmarks.sampling import problem_requests, sample_records
from workers.card import BenchmarkCard, LiteratureFormat, MatchRule
from workers.execspec import ExecutionRecord, Outcome, SandboxLimits
from workers.keys import canonical_json, sha256_hex
from workers.spec import Generation, GenRequest, ModelSpec, SampleRecord, SettingSpec, StopRule

PROBLEMS = {"toy/0": ("1 + 1 =", "2"), "toy/1": ("2 + 3 =", "5")}
CARD = BenchmarkCard(
    benchmark="toy",
    title="Toy arithmetic",
    dataset="two sums, inline",
    dataset_id=None,
    dataset_split=None,
    metric="pass@1",
    metric_description="pass@1: the answer equals the sum",
    graded=False,
    n_problems=len(PROBLEMS),
    unit="sum",
    literature="",  # nothing published: the report says so
    literature_format=LiteratureFormat.PAPERS,
    literature_source_id="",
    literature_title="",
    mapping="",
    reported_variants=("v1",),
    match_rule=MatchRule.EXACT_COUNT,
    semantics="toy",
)


@dataclass(frozen=True)
class Toy:
    name: str = "toy"
    data_sha256: str = sha256_hex(canonical_json(PROBLEMS))
    source: str = "inline"

    def problem_ids(self) -> tuple[str, ...]:
        return tuple(PROBLEMS)

    def requests(
        self, setting: SettingSpec, key: str, chat: ChatRenderer | None = None
    ) -> list[GenRequest]:
        out: list[GenRequest] = []
        for task_id in self.problem_ids()[: setting.benchmark.limit]:
            out += problem_requests(
                setting,
                key,
                task_id,
                PROBLEMS[task_id][0],
                ("\n",),
                add_special_tokens=True,
                stop_rule=StopRule.STOP_WORDS,
            )
        return out

    def samples(
        self,
        setting: SettingSpec,
        requests: Sequence[GenRequest],
        generations: Sequence[Generation],
        eos_token: str | None,
    ) -> tuple[SampleRecord, ...]:
        return sample_records(requests, generations, lambda g: g.continuation.strip())

    def execute(
        self, samples: Sequence[SampleRecord], limits: SandboxLimits, workers: int | None = None
    ) -> list[ExecutionRecord]:
        return [
            ExecutionRecord(s.task_id, s.sample_index, outcome, float(ok), None, None, 0.0)
            for s in samples
            for ok in [s.program == PROBLEMS[s.task_id][1]]
            for outcome in [Outcome.PASSED if ok else Outcome.FAILED]
        ]

    def summarize(self, executions: Sequence[Mapping[str, Any]]) -> ScoreSummary | None:
        return None

    def execution_environment(self, limits: SandboxLimits) -> dict[str, str]:
        return {}  # nothing runs: the answer is compared as text


@dataclass(frozen=True)
class ToyDefinition:
    name: str = "toy"
    variants: tuple[str, ...] = ("v1",)
    templates: tuple[str, ...] = ("own", "plain")
    card: BenchmarkCard = CARD

    def template_note(self, template: str) -> str | None:
        return None

    def resolve_template(self, template: str, model: ModelSpec) -> str:
        return "plain" if template == "own" else template

    def template_kind(self, template: str, model: ModelSpec) -> str:
        return "own" if template == "plain" else template

    def skip_reason(self, setting: SettingSpec) -> str | None:
        return "the toy cannot sample" if setting.decoding.do_sample else None

    def load(self, source: BenchmarkSource) -> Toy:
        return Toy()


TOY = ToyDefinition()
