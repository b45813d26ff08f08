"""HumanEvalFix as a benchmark adapter: requests from a setting, candidates from generations,
sandbox jobs from candidates. Pure apart from the sandbox call in `execute`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workers.benchmarks.base import ChatRenderer, ScoreSummary
from workers.benchmarks.humanevalfix.data import Problem, ProblemSet
from workers.benchmarks.humanevalfix.postprocess import (
    postprocess,
    program_for,
    reference_candidate,
    stop_words,
)
from workers.benchmarks.humanevalfix.prompts import (
    CHAT_TEMPLATE,
    UnsupportedTemplate,
    build_chat_prompt,
    build_prompt,
    chat_messages,
    check_template,
)
from workers.benchmarks.sampling import problem_requests, sample_records
from workers.execspec import ExecJob, ExecutionRecord, Outcome, SandboxLimits
from workers.spec import BenchmarkSpec, Generation, GenRequest, SampleRecord, SettingSpec, Variant


@dataclass(frozen=True)
class HumanEvalFix:
    """The benchmark bound to a loaded problem set (shipped to workers once per grid)."""

    problem_set: ProblemSet
    name: str = "humanevalfix"

    @property
    def data_sha256(self) -> str:
        return self.problem_set.sha256

    @property
    def source(self) -> str:
        return self.problem_set.source

    def problem_ids(self) -> tuple[str, ...]:
        return tuple(p.task_id for p in self.problem_set.problems)

    def summarize(self, executions: Sequence[Mapping[str, Any]]) -> ScoreSummary | None:
        """None: the headline is the harness's pass@k over problems."""
        return None

    def execution_environment(self, limits: SandboxLimits) -> dict[str, str]:
        """The sandbox's level for `limits` on this host, and the interpreter the programs run
        in (this process's: the sandbox runs sys.executable)."""
        from workers.execution import python_identity
        from workers.sandbox import sandbox_isolation

        return {"isolation": sandbox_isolation(limits).level.value, "python": python_identity()}

    def problems(self, selection: BenchmarkSpec) -> tuple[Problem, ...]:
        """The problems a setting covers, in dataset order."""
        chosen = set(selection.select(self.problem_ids()))
        return tuple(p for p in self.problem_set.problems if p.task_id in chosen)

    def prompt(self, problem: Problem, setting: SettingSpec, chat: ChatRenderer | None) -> str:
        variant = Variant(setting.benchmark.variant)
        if setting.template == CHAT_TEMPLATE:
            if chat is None:
                raise UnsupportedTemplate("template 'chat' needs the model's tokenizer")
            return build_chat_prompt(chat(chat_messages(problem, variant)), problem, variant)
        return build_prompt(problem, variant, setting.template)

    def requests(
        self, setting: SettingSpec, key: str, chat: ChatRenderer | None = None
    ) -> list[GenRequest]:
        """One request per problem (harness seeding) or per sample (per-sample seeds). Diff
        templates render too (`prompts` shows them); scoring them is refused elsewhere: the
        grid plans them as skipped and post-processing rejects their outputs."""
        check_template(setting.template)
        stop = stop_words(setting.template)
        out = []
        for problem in self.problems(setting.benchmark):
            out += problem_requests(
                setting,
                key,
                problem.task_id,
                self.prompt(problem, setting, chat),
                stop,
                add_special_tokens=setting.template != CHAT_TEMPLATE,
            )
        return out

    def samples(
        self,
        setting: SettingSpec,
        requests: Sequence[GenRequest],
        generations: Sequence[Generation],
        eos_token: str | None,
    ) -> tuple[SampleRecord, ...]:
        """Post-process every generation into the candidate program the harness scores."""
        by_id = {p.task_id: p for p in self.problem_set.problems}
        variant = Variant(setting.benchmark.variant)

        def candidate(g: Generation) -> str:
            return postprocess(
                by_id[g.task_id], variant, setting.template, g.continuation, eos_token
            )

        return sample_records(requests, generations, candidate)

    def exec_jobs(self, samples: Sequence[SampleRecord], timeout_s: float) -> list[ExecJob]:
        by_id = {p.task_id: p for p in self.problem_set.problems}
        return [
            ExecJob(
                job_id=f"{s.task_id}#{s.sample_index}",
                program=program_for(s.program, by_id[s.task_id]),
                timeout_s=timeout_s,
            )
            for s in samples
        ]

    def execute(
        self, samples: Sequence[SampleRecord], limits: SandboxLimits, workers: int | None = None
    ) -> list[ExecutionRecord]:
        """Run every candidate against its tests in the sandbox (deduplicated)."""
        from workers.execution import execute_jobs

        jobs = self.exec_jobs(samples, limits.timeout_s)
        results = execute_jobs(jobs, limits, workers=workers)
        return [
            ExecutionRecord(
                task_id=s.task_id,
                sample_index=s.sample_index,
                outcome=r.outcome,
                score=1.0 if r.outcome is Outcome.PASSED else 0.0,
                error_type=r.error_type,
                error_message=r.error_message,
                duration_s=r.duration_s,
                isolation=r.isolation,
            )
            for s, r in zip(samples, results, strict=True)
        ]


def reference_samples(problem_set: ProblemSet, variant: Variant, buggy: bool) -> list[SampleRecord]:
    """Canonical fixes (or the buggy code) as candidates, for `check-references`."""
    out = []
    for p in problem_set.problems:
        body = p.buggy_solution if buggy else p.canonical_solution
        candidate = reference_candidate(p, variant, body)
        out.append(SampleRecord(p.task_id, 0, "", body, candidate, 0, 0, False, False))
    return out
