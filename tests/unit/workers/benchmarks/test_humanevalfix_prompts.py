"""Every golden prompt row of the harness: 24 templates x 2 variants x 164 problems."""

from __future__ import annotations

import hashlib

import pytest

from tests.conftest import read_jsonl
from workers.benchmarks.humanevalfix.prompts import (
    HARNESS_TEMPLATES,
    UnknownTemplate,
    build_prompt,
)
from workers.spec import Variant

TASK_VARIANT = {"humanevalfixtests-python": Variant.TESTS, "humanevalfixdocs-python": Variant.DOCS}


@pytest.fixture(scope="module")
def golden(shared_data):
    return read_jsonl(shared_data / "humanevalfix-golden-prompts.jsonl")


def test_golden_file_covers_every_template_and_problem(golden):
    templates = {row["prompt_option"] for row in golden}
    assert templates == set(HARNESS_TEMPLATES) | {"continue", "edit"}
    assert len(golden) == 24 * 2 * 164


def test_every_golden_prompt_is_byte_identical(golden, problem_set):
    by_id = {p.task_id: p for p in problem_set.problems}
    checked, mismatches = 0, []
    for row in golden:
        if row["error"] is not None:
            continue
        prompt = build_prompt(
            by_id[row["task_id"]], TASK_VARIANT[row["task"]], row["prompt_option"]
        )
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        if digest != row["sha256_utf8"] or len(prompt) != row["n_chars"]:
            mismatches.append((row["task"], row["prompt_option"], row["task_id"]))
        if row.get("prompt") is not None:
            assert prompt == row["prompt"]
        checked += 1
    assert mismatches == []
    assert checked == 7216


@pytest.mark.parametrize("template", ["continue", "edit", "prompt", "instrct"])
def test_rejected_templates_name_the_valid_ones(template, problem_set, golden):
    with pytest.raises(UnknownTemplate) as info:
        build_prompt(problem_set.problems[0], Variant.TESTS, template)
    message = str(info.value)
    assert repr(template) in message or template in message
    assert "instruct" in message and "codellama" in message


def test_golden_errors_are_rejected_for_every_row(golden, problem_set):
    by_id = {p.task_id: p for p in problem_set.problems}
    errored = [row for row in golden if row["error"] is not None]
    assert len(errored) == 2 * 2 * 164
    for row in errored:
        with pytest.raises(UnknownTemplate):
            build_prompt(by_id[row["task_id"]], TASK_VARIANT[row["task"]], row["prompt_option"])
