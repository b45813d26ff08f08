"""The harness's post-processing on the 452 golden continuations (program text).

Pass/fail of the same rows through the sandbox is checked in tests/integration."""

from __future__ import annotations

import pytest

from tests.conftest import read_jsonl
from workers.benchmarks.humanevalfix.postprocess import (
    postprocess,
    remove_last_block,
    stop_words,
)
from workers.benchmarks.humanevalfix.prompts import UnsupportedTemplate
from workers.spec import Variant

TASK_VARIANT = {"humanevalfixtests-python": Variant.TESTS, "humanevalfixdocs-python": Variant.DOCS}


def test_all_golden_rows_postprocess_identically(shared_data, problem_set):
    rows = read_jsonl(shared_data / "humanevalfix-golden-postprocess.jsonl")
    assert len(rows) == 452
    by_id = {p.task_id: p for p in problem_set.problems}
    wrong = [
        (r["task"], r["prompt_option"], r["task_id"], r["suffix_kind"])
        for r in rows
        if postprocess(
            by_id[r["task_id"]],
            TASK_VARIANT[r["task"]],
            r["prompt_option"],
            r["raw_generation_after_prompt"],
        )
        != r["postprocessed"]
    ]
    assert wrong == []


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("\n    return 1\ndef g():\n    pass", "\n    return 1"),  # stop word
        ("\n    return 1\n\nfoo()", "\n    return 1\n"),  # non-indented line
        ("\n    x = '<|endoftext|>'", "\n    x = '"),  # special tokens cut anywhere
        ("\r\n    return 1\r\ndef g(): pass", "\r\n    return 1\r"),  # CRLF keeps the \r
        ("pass", ""),  # a body glued to the colon is a non-indented first line
        (" # comment\n    return 1", " # comment\n    return 1"),
        ("\n\treturn 1", "\n\treturn 1"),
    ],
)
def test_remove_last_block_rules(code, expected):
    assert remove_last_block(code, stop_words("instruct")) == expected


def test_stop_words_are_per_template_and_not_shared():
    assert "<|end|>" in stop_words("starchat")
    assert "<|end|>" not in stop_words("instruct")  # no leak from an earlier template
    assert "```" in stop_words("issue")
    assert stop_words("instruct", eos_token="</s>")[-1] == "</s>"
    assert stop_words("diff")[:3] == ("<commit_before>", "<commit_msg>", "<commit_after>")


def test_eos_token_cuts_like_a_stop_word(problem_set):
    problem = problem_set.problems[0]
    out = postprocess(problem, Variant.TESTS, "codellama", "\n    return True</s>junk", "</s>")
    assert out.endswith("-> bool:\n    return True")


@pytest.mark.parametrize("template", ["diff", "diff-carper"])
def test_diff_templates_are_rejected_with_a_reason(template, problem_set):
    with pytest.raises(UnsupportedTemplate, match="diff"):
        postprocess(problem_set.problems[0], Variant.TESTS, template, "@@ -1 +1 @@")
