"""Prompts against the official batched prompt CSVs, and response trimming (spec §2)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.unit.workers.benchmarks.infibench.conftest import make_case
from workers.benchmarks.infibench.prompts import (
    GENERATION_DEFAULTS,
    NON_QA_SYSTEM_PROMPT,
    QA_SYSTEM_PROMPT,
    PromptFormat,
    chat_messages,
    default_prompt,
    system_prompt,
    trim_response,
)
from workers.benchmarks.infibench.suite import DEV_SUITE_DIR


def test_v21_prompts_equal_the_official_csv(v21_suite, infibench_dir):
    frame = pd.read_csv(
        infibench_dir / "batched_prompts" / "suite_v2.1.csv", dtype=str, keep_default_na=False
    )
    assert list(frame.filename) == [c.case_path for c in v21_suite.cases]
    for row, case in zip(frame.itertuples(), v21_suite.cases, strict=True):
        assert system_prompt(case) == row.system_prompt, case.case_id
        assert case.prompt == row.content_prompt, case.case_id
        assert default_prompt(case) == row.prompt, case.case_id
    assert sum(system_prompt(c) == QA_SYSTEM_PROMPT for c in v21_suite.cases) == 6


def test_dev_prompts_equal_the_official_csv(dev_suite, infibench_dir):
    frame = pd.read_csv(
        infibench_dir / DEV_SUITE_DIR / "suite_v2.0.0_dev.csv", dtype=str, keep_default_na=False
    )
    by_path = {c.case_path: c for c in dev_suite.cases}
    for row in frame.itertuples():
        assert default_prompt(by_path[row.filename]) == row.prompt, row.filename


def test_chat_messages_and_formats(v21_suite):
    case = v21_suite.case("0-0-0")
    assert chat_messages(case) == [
        {"role": "system", "content": NON_QA_SYSTEM_PROMPT},
        {"role": "user", "content": case.prompt},
    ]
    assert default_prompt(case, PromptFormat.NO_NEWLINE) == NON_QA_SYSTEM_PROMPT + case.prompt
    assert default_prompt(case, PromptFormat.END_NEWLINE) == default_prompt(case) + "\n"


def test_system_prompt_needs_similarity_as_the_only_grading_key():
    similarity = [{"metric": "rouge1", "references": ["x"]}]
    assert system_prompt(make_case({"similarity": similarity})) == QA_SYSTEM_PROMPT
    with_max = make_case({"similarity": similarity, "max_score": 1.0})
    assert system_prompt(with_max) == NON_QA_SYSTEM_PROMPT


def test_generation_defaults():
    assert (
        GENERATION_DEFAULTS.temperature,
        GENERATION_DEFAULTS.top_p,
        GENERATION_DEFAULTS.n_samples,
        GENERATION_DEFAULTS.max_new_tokens,
    ) == (0.2, 0.9, 30, 1024)


@pytest.mark.parametrize(
    ("text", "eos", "expected"),
    [
        ("answer<|im_end|>junk", None, "answer"),
        ("a<end_of_turn>b<|im_end|>c", None, "a"),
        ("a<|eot_id|>b", None, "a"),
        ("a<|end_of_text|>", None, "a"),
        ("a<eod>b", None, "a"),
        ("keep <s>tag</s> and more", "</s>", "keep <s>tag"),
        ("  spaces and\n\nnewlines stay  \n", None, "  spaces and\n\nnewlines stay  \n"),
        ("", "</s>", ""),
    ],
)
def test_trim_response(text, eos, expected):
    assert trim_response(text, eos) == expected
