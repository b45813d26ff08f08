"""InfiBench (suite v2.1, and the v2.0.0 dev suite), scored exactly like the official grader.

Spec: shared/specs/infibench.md; what is implemented and every deviation: docs/infibench.md.

    suite = load_suite(data_dir / "infibench")            # or load_packed_suite / load_dev_suite
    messages = chat_messages(suite.cases[0])              # or default_prompt(case)
    text = trim_response(continuation, eos_token)         # post-processing of a generation
    scores = score_responses(suite, rows, workers=2)      # rows: case_path, sample_index,
                                                          #       completion
    report = aggregate(suite, scores)                     # best@10 mean ± std and breakdowns
    rows = to_rows(scores)                                # JSON-native dicts for storage
    executor_availability()                               # which unit-test toolchains work here
"""

from workers.benchmarks.infibench.aggregate import GroupedScore, SuiteScore, aggregate
from workers.benchmarks.infibench.executors import (
    EXECUTOR_LANGS,
    ExecutorConfig,
    executor_availability,
)
from workers.benchmarks.infibench.grade import (
    ResponseInput,
    grade_response,
    official_response_text,
    score_responses,
    unscorable_cases,
)
from workers.benchmarks.infibench.prompts import (
    END_MARKERS,
    GENERATION_DEFAULTS,
    GenerationDefaults,
    PromptFormat,
    chat_messages,
    default_prompt,
    system_prompt,
    trim_response,
)
from workers.benchmarks.infibench.scores import (
    MetricScore,
    ResponseScore,
    ResponseStatus,
    to_row,
    to_rows,
)
from workers.benchmarks.infibench.suite import (
    Case,
    Suite,
    SuiteError,
    load_dev_suite,
    load_packed_suite,
    load_suite,
    parse_case,
    suite_from_cases,
)

__all__ = [
    "EXECUTOR_LANGS",
    "END_MARKERS",
    "GENERATION_DEFAULTS",
    "Case",
    "ExecutorConfig",
    "GenerationDefaults",
    "GroupedScore",
    "MetricScore",
    "PromptFormat",
    "ResponseInput",
    "ResponseScore",
    "ResponseStatus",
    "Suite",
    "SuiteError",
    "SuiteScore",
    "aggregate",
    "chat_messages",
    "default_prompt",
    "executor_availability",
    "grade_response",
    "load_dev_suite",
    "load_packed_suite",
    "load_suite",
    "official_response_text",
    "parse_case",
    "score_responses",
    "suite_from_cases",
    "system_prompt",
    "to_row",
    "to_rows",
    "trim_response",
    "unscorable_cases",
]
