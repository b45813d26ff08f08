"""InfiBench as a benchmark adapter: requests, trimmed responses, grading, best@10.

Templates: `chat` (system + user messages through the tokenizer's chat template, as the
authors' API callers send them) and `default` (`system + "\\n" + question`, for models without a
chat template). `own` resolves to `chat` in the grid. Generation stops at the end-of-turn
markers and the eos only (no code-block heuristics), and at 10 consecutive newlines as the
official HF stopping hook does.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workers.benchmarks.base import ChatRenderer, ScoreSummary
from workers.benchmarks.infibench.aggregate import GROUP_SIZE, aggregate
from workers.benchmarks.infibench.grade import ResponseInput, score_responses
from workers.benchmarks.infibench.prompts import (
    END_MARKERS,
    chat_messages,
    default_prompt,
    trim_response,
)
from workers.benchmarks.infibench.scores import MetricScore, ResponseScore, ResponseStatus
from workers.benchmarks.infibench.suite import Case, Suite
from workers.benchmarks.sampling import problem_requests, sample_records
from workers.execspec import ExecutionRecord, Outcome, SandboxLimits
from workers.spec import BenchmarkSpec, Generation, GenRequest, SampleRecord, SettingSpec, StopRule

TEMPLATES = ("chat", "default")
METRIC = f"best@{GROUP_SIZE}"  # the headline: official avg_max_10
TEN_NEWLINES = "\n" * 10  # the official HF stopping hook's blank-run rule


class UnknownInfiBenchTemplate(ValueError):
    pass


@dataclass(frozen=True)
class InfiBench:
    suite: Suite
    name: str = "infibench"

    @property
    def data_sha256(self) -> str:
        return self.suite.sha256

    @property
    def source(self) -> str:
        return self.suite.source

    def problem_ids(self) -> tuple[str, ...]:
        return tuple(c.case_path for c in self.suite.cases)

    def cases(self, selection: BenchmarkSpec) -> tuple[Case, ...]:
        """The questions a setting covers, in suite order."""
        chosen = set(selection.select(self.problem_ids()))
        return tuple(c for c in self.suite.cases if c.case_path in chosen)

    def prompt(self, case: Case, template: str, chat: ChatRenderer | None) -> str:
        if template == "chat":
            if chat is None:
                raise UnknownInfiBenchTemplate("template 'chat' needs the model's tokenizer")
            return chat(chat_messages(case))
        if template == "default":
            return default_prompt(case)
        raise UnknownInfiBenchTemplate(
            f"unknown InfiBench template {template!r}. Valid: {', '.join(TEMPLATES)}, own (= chat)"
        )

    def requests(
        self, setting: SettingSpec, key: str, chat: ChatRenderer | None = None
    ) -> list[GenRequest]:
        out = []
        for case in self.cases(setting.benchmark):
            out += problem_requests(
                setting,
                key,
                case.case_path,
                self.prompt(case, setting.template, chat),
                (*END_MARKERS, TEN_NEWLINES),
                add_special_tokens=setting.template != "chat",
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
        # the graded response: the continuation cut at the end-of-turn markers / eos
        return sample_records(
            requests, generations, lambda g: trim_response(g.continuation, eos_token)
        )

    def execute(
        self, samples: Sequence[SampleRecord], limits: SandboxLimits, workers: int | None = None
    ) -> list[ExecutionRecord]:
        """Grade every response like the official grader (unit tests through the sandbox)."""
        from workers.sandbox import sandbox_isolation

        full = {c.case_path: c.full_score for c in self.suite.cases}
        rows = [ResponseInput(s.task_id, s.sample_index, s.program) for s in samples]
        scores = score_responses(self.suite, rows, workers=workers or 2)
        level = sandbox_isolation(limits).level.value
        return [execution_record(score, full[score.case_path], level) for score in scores]

    def execution_environment(self, limits: SandboxLimits) -> dict[str, str]:
        """The sandbox's level, the interpreter, and which unit-test toolchains this host has
        (a missing one turns a question into toolchain-missing)."""
        from workers.benchmarks.infibench.executors import executor_availability
        from workers.execution import python_identity
        from workers.sandbox import sandbox_isolation

        available = sorted(lang for lang, ok in executor_availability().items() if ok)
        return {
            "isolation": sandbox_isolation(limits).level.value,
            "python": python_identity(),
            "executors": ",".join(available),
        }

    def summarize(self, executions: Sequence[Mapping[str, Any]]) -> ScoreSummary:
        """best@10 (official avg_max_10) and breakdowns from stored execution rows, over the
        questions the setting covered (all of them unless `benchmark.limit` or
        `benchmark.problems` selected some)."""
        covered = {row["task_id"] for row in executions}
        suite = dataclasses.replace(
            self.suite, cases=tuple(c for c in self.suite.cases if c.case_path in covered)
        )
        result = aggregate(suite, [response_score(row) for row in executions])
        return ScoreSummary(
            metric=METRIC,
            value=result.overall.pct / 100,
            value_std=result.overall.std_pct / 100,
            n_problems=len(suite.cases),
            n_unscorable=len(result.unscorable_cases),
            details_json=json.dumps(
                {
                    "scorable_pct": result.scorable.pct,
                    "scorable_std_pct": result.scorable.std_pct,
                    "n_groups": result.n_groups,
                    "by_lang": {g.name: g.pct for g in result.by_lang},
                    "by_type": {g.name: g.pct for g in result.by_type},
                    "by_metric": {g.name: g.pct for g in result.by_metric},
                    "unscorable_cases": list(result.unscorable_cases),
                    "missing_languages": list(result.missing_languages),
                    "error_cases": list(result.error_cases),
                    "cases_without_responses": list(result.cases_without_responses),
                },
                sort_keys=True,
            ),
            problem_scores=result.case_scores,
        )


def execution_record(
    score: ResponseScore, full_score: float, isolation: str | None = None
) -> ExecutionRecord:
    """`isolation`: the sandbox's level, recorded for responses whose unit tests ran in it."""
    if score.status is ResponseStatus.TOOLCHAIN_MISSING:
        outcome, error_type = Outcome.TOOLCHAIN_MISSING, "ToolchainMissing"
    elif score.status is ResponseStatus.ERROR:
        outcome, error_type = Outcome.ERROR, "GradingError"
    else:
        passed = score.score is not None and score.score >= full_score
        outcome, error_type = (Outcome.PASSED if passed else Outcome.FAILED), None
    details = {
        "status": str(score.status),
        "case_id": score.case_id,
        "missing_executors": list(score.missing_executors),
        "metrics": [
            {
                "metric": m.metric,
                "counts_as": m.counts_as,
                "earned": m.earned,
                "total": m.total,
                "detail": m.detail,
            }
            for m in score.metrics
        ],
    }
    return ExecutionRecord(
        task_id=score.case_path,
        sample_index=score.sample_index,
        outcome=outcome,
        score=math.nan if score.score is None else float(score.score),
        error_type=error_type,
        error_message=score.error,
        duration_s=0.0,
        details=json.dumps(details, sort_keys=True, ensure_ascii=False, default=str),
        isolation=isolation if any(m.metric == "unit_test" for m in score.metrics) else None,
    )


def response_score(row: Mapping[str, Any]) -> ResponseScore:
    """A stored execution row back into the ResponseScore the aggregate needs."""
    details = json.loads(row["details"] or "{}")
    value = row["score"]
    return ResponseScore(
        case_path=row["task_id"],
        case_id=details.get("case_id", ""),
        sample_index=int(row["sample_index"]),
        status=ResponseStatus(details.get("status", "scored")),
        score=None if value is None or (isinstance(value, float) and math.isnan(value)) else value,
        metrics=tuple(
            MetricScore(m["metric"], m["earned"], m["total"], m.get("detail"), m["counts_as"])
            for m in details.get("metrics", [])
        ),
        error=row.get("error_message"),
        missing_executors=tuple(details.get("missing_executors", ())),
    )
