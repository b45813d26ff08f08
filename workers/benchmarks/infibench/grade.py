"""Scoring responses exactly like the official `grade_response` (spec §3).

1. `ans` and `tot` start at 0; each metric present adds its earned and possible points, in the
   order keywords, blank_filling, unit_test, similarity, customized.
2. `max_score`: tot := max_score, ans := min(ans, tot). `min_score`: ans := max(ans, min_score).
3. score = ans / tot * full_score (can be negative: 1-4-322 has a `neg` rule and no min_score).

`score_responses` grades many responses: it builds every unit-test program first, runs each
distinct program once (identical response code + test), on a thread pool, then grades.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from workers.benchmarks.infibench.blanks import match_blanks
from workers.benchmarks.infibench.executors import (
    ExecOutcome,
    ExecutorConfig,
    executor_availability,
    run_program,
)
from workers.benchmarks.infibench.hooks import call_hook
from workers.benchmarks.infibench.keywords import match_keywords
from workers.benchmarks.infibench.programs import Program, build_program, executor_language
from workers.benchmarks.infibench.scores import MetricScore, ResponseScore, ResponseStatus
from workers.benchmarks.infibench.similarity import RougeUnavailable, score_similarity
from workers.benchmarks.infibench.suite import Case, Suite

logger = logging.getLogger(__name__)

Runner = Callable[[Program], ExecOutcome]

# Cells pandas' read_csv turns into NaN by default; the batched grader then grades str(nan).
PANDAS_NA_STRINGS = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    }
)


class ExecutorFailure(RuntimeError):
    """Running a unit test failed for a reason outside the response (the sandbox itself)."""


@dataclass(frozen=True)
class ResponseInput:
    case_path: str  # the suite's case path ("cases/eval_0-0-0.yaml") or the case id
    sample_index: int
    completion: str  # the post-processed response text


def official_response_text(completion: str) -> str:
    """The text the batched grader actually grades: pandas NA cells (e.g. "") become "nan"."""
    return "nan" if completion in PANDAS_NA_STRINGS else completion


def unit_test_languages(case: Case) -> tuple[str, ...]:
    """Executor languages a case needs (empty when it has no unit tests)."""
    crit = case.criteria.unit_test
    if crit is None:
        return ()
    try:
        return (executor_language(crit.lang),)
    except ValueError:
        return ()  # grading will report the unsupported language as an error


def unscorable_cases(suite: Suite, available: Mapping[str, bool]) -> dict[str, tuple[str, ...]]:
    """Missing executor language -> ids of the cases that need it (for `doctor` and plans)."""
    out: dict[str, list[str]] = {}
    for case in suite.cases:
        for lang in unit_test_languages(case):
            if not available.get(lang, False):
                out.setdefault(lang, []).append(case.case_id)
    return {lang: tuple(ids) for lang, ids in sorted(out.items())}


def case_programs(case: Case, response: str) -> list[Program]:
    """Every unit-test program of one response (raises like grading would)."""
    crit = case.criteria.unit_test
    if crit is None:
        return []
    lang = executor_language(crit.lang)
    return [build_program(lang, response, item) for item in crit.tests]


def _run_unit_tests(case: Case, response: str, run: Runner) -> MetricScore:
    crit = case.criteria.unit_test
    assert crit is not None
    earned = total = 0.0
    details = []
    for program, item in zip(case_programs(case, response), crit.tests, strict=True):
        total += item.weight
        try:
            outcome = run(program)
        except Exception as e:
            raise ExecutorFailure(f"{case.case_id}: running a unit test failed: {e}") from e
        earned += float(outcome.passed) * item.weight
        details.append(
            {
                "passed": outcome.passed,
                "result": outcome.result[:500],
                "duration_s": round(outcome.duration_s, 3),
            }
        )
    return MetricScore("unit_test", earned, total, details, "unit_test")


def _metric_scores(case: Case, response: str, run: Runner) -> list[MetricScore]:
    crit = case.criteria
    out: list[MetricScore] = []
    if crit.keywords is not None:
        kw = match_keywords(crit.keywords.rules, response)
        earned, total = kw.earned, kw.total
        detail: dict[str, object] = {"statuses": list(kw.statuses)}
        if crit.keywords.post_handler is not None:
            earned, total, post = call_hook(
                crit.keywords.post_handler, kw.earned, kw.total, list(kw.statuses)
            )
            detail["post_handler_detail"] = post
        out.append(MetricScore("keywords", earned, total, detail, "keywords"))
    if crit.blank_filling is not None:
        bf = match_blanks(crit.blank_filling, response)
        earned, total = bf.earned, bf.total
        detail = {"details": list(bf.details), "match_rate": bf.match_rate}
        if crit.blank_filling.post_handler is not None:
            earned, total, post = call_hook(
                crit.blank_filling.post_handler, bf.earned, bf.total, list(bf.details)
            )
            detail["post_handler_detail"] = post
        out.append(MetricScore("blank_filling", earned, total, detail, "blank_filling"))
    if crit.unit_test is not None:
        out.append(_run_unit_tests(case, response, run))
    if crit.similarity is not None:
        sim = score_similarity(crit.similarity, response)
        details = list(sim.details)
        out.append(MetricScore("similarity", sim.earned, sim.total, details, "similarity"))
    if crit.customized is not None:
        earned, total, detail = call_hook(crit.customized.hook, response)
        out.append(
            MetricScore("customized", earned, total, detail, crit.customized.real_metric_type)
        )
    return out


def grade_response(
    case: Case,
    response: str,
    *,
    sample_index: int = 0,
    run: Runner | None = None,
    available: Mapping[str, bool] | None = None,
) -> ResponseScore:
    """Score one response of one case.

    `run` executes a unit-test program (default: `run_program` in the sandbox); `available`
    says which executor languages are installed (default: `executor_availability()`, probed
    only for cases with unit tests). `response` is graded as given; see
    `official_response_text` for the batched grader's NaN quirk.
    """

    def result(status, score, metrics=(), error=None, missing=()) -> ResponseScore:
        return ResponseScore(
            case.case_path,
            case.case_id,
            sample_index,
            status,
            score,
            tuple(metrics),
            error,
            tuple(missing),
        )

    langs = unit_test_languages(case)
    if langs:
        available = executor_availability() if available is None else available
        missing = [lang for lang in langs if not available.get(lang, False)]
        if missing:
            return result(
                ResponseStatus.TOOLCHAIN_MISSING,
                None,
                missing=missing,
                error=f"executor not installed: {', '.join(missing)}",
            )
    try:
        metrics = _metric_scores(case, response, run or run_program)
        ans = tot = 0.0
        for metric in metrics:
            ans, tot = ans + metric.earned, tot + metric.total
        crit = case.criteria
        if crit.max_score is not None:
            tot = crit.max_score
            ans = min(ans, tot)
        if crit.min_score is not None:
            ans = max(ans, crit.min_score)
        score = ans / tot * case.full_score
    except (ExecutorFailure, RougeUnavailable):
        raise  # the machine, not the response: never a silent 0
    except Exception as e:  # the official grader catches everything around a case
        return result(ResponseStatus.ERROR, 0.0, error=f"{type(e).__name__}: {e}")
    return result(ResponseStatus.SCORED, score, metrics)


def _as_input(row: ResponseInput | Mapping, fallback_index: int) -> ResponseInput:
    if isinstance(row, ResponseInput):
        return row
    case_path = row.get("case_path", row.get("filename"))
    index = row.get("sample_index", row.get("completion_no", row.get("sample_idx")))
    completion = row.get("completion")
    if case_path is None or completion is None:
        raise ValueError(f"a response row needs case_path (or filename) and completion: {row!r}")
    return ResponseInput(
        str(case_path),
        fallback_index if index is None else int(index),
        "" if completion != completion else str(completion),
    )  # NaN -> ""


def _run_unique(jobs: dict[tuple, Program], run: Runner, workers: int) -> dict[tuple, ExecOutcome]:
    keys = list(jobs)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        outcomes = dict(zip(keys, pool.map(lambda k: run(jobs[k]), keys), strict=True))
    logger.info(
        "infibench: ran %d distinct unit-test programs in %.1f s with %d workers",
        len(keys),
        time.monotonic() - started,
        workers,
    )
    return outcomes


def _resolve(
    suite: Suite, responses: Iterable[ResponseInput | Mapping], nan_quirk: bool
) -> list[tuple[Case, ResponseInput, str]]:
    """(case, input row, text to grade) per response, in input order."""
    by_key = {c.case_path: c for c in suite.cases} | {c.case_id: c for c in suite.cases}
    counts: dict[str, int] = {}
    items = []
    for raw in responses:
        key = str(
            raw.case_path
            if isinstance(raw, ResponseInput)
            else raw.get("case_path", raw.get("filename"))
        )
        if key not in by_key:
            raise KeyError(f"response for unknown case {key!r} (suite {suite.name})")
        case = by_key[key]
        row = _as_input(raw, counts.get(case.case_path, 0))
        counts[case.case_path] = counts.get(case.case_path, 0) + 1
        text = official_response_text(row.completion) if nan_quirk else row.completion
        items.append((case, row, text))
    return items


def _distinct_programs(
    items: list[tuple[Case, ResponseInput, str]], available: Mapping[str, bool]
) -> dict[tuple, Program]:
    """Every unit-test program to run, once per (language, code, timeout)."""
    jobs: dict[tuple, Program] = {}
    for case, _, text in items:
        if not all(available.get(lang, False) for lang in unit_test_languages(case)):
            continue
        try:
            programs = case_programs(case, text)
        except Exception:
            continue  # grading reports it as an error
        for program in programs:
            jobs.setdefault((program.lang, program.code, program.timeout_s), program)
    return jobs


def score_responses(
    suite: Suite,
    responses: Iterable[ResponseInput | Mapping],
    *,
    workers: int = 2,
    run: Runner | None = None,
    available: Mapping[str, bool] | None = None,
    nan_quirk: bool = True,
    config: ExecutorConfig | None = None,
) -> list[ResponseScore]:
    """Score response rows (case_path or filename, sample_index, completion), in input order.

    Rows may be `ResponseInput`s or mappings (`filename`/`case_path`, `sample_index`/
    `completion_no`, `completion`); a row without an index gets its position within its case.
    `nan_quirk` grades pandas-NA texts (e.g. "") as "nan", like the official batched grader.
    Identical unit-test programs run once; `workers` threads run them in parallel. `run`
    (default: `run_program` in the sandbox with `config`) and `available` (default:
    `executor_availability(config)`) can be replaced, e.g. by fakes in tests.
    """
    items = _resolve(suite, responses, nan_quirk)
    if run is None:
        run = functools.partial(run_program, config=config)
    needs_tests = any(unit_test_languages(case) for case, _, _ in items)
    if available is None:
        available = executor_availability(config) if needs_tests else {}
    jobs = _distinct_programs(items, available)
    outcomes = _run_unique(jobs, run, workers) if jobs else {}

    def cached_run(program: Program) -> ExecOutcome:
        key = (program.lang, program.code, program.timeout_s)
        return outcomes[key] if key in outcomes else run(program)

    return [
        grade_response(
            case, text, sample_index=row.sample_index, run=cached_run, available=available
        )
        for case, row, text in items
    ]
