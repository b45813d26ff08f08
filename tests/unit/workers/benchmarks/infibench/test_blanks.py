"""Blank filling: the official LCS alignment and the blank quirks (spec §4.2, §6.3-6.5)."""

from __future__ import annotations

import random

import pytest

from tests.unit.workers.benchmarks.infibench.conftest import make_case
from tests.unit.workers.benchmarks.infibench.lcs_reference import lcs_align_reference
from workers.benchmarks.infibench.blanks import lcs_align, match_blanks
from workers.benchmarks.infibench.grade import grade_response


def blanks(template: str, targets: list, response: str, **extra):
    case = make_case({"blank_filling": {"template": template, "targets": targets, **extra}})
    assert case.criteria.blank_filling is not None
    return match_blanks(case.criteria.blank_filling, response)


def test_vectorised_alignment_equals_the_line_by_line_port():
    rng = random.Random(20240721)
    for _ in range(1500):
        template = "".join(rng.choice("ab \n") for _ in range(rng.randint(1, 14)))
        response = "".join(rng.choice("abc \n") for _ in range(rng.randint(1, 18)))
        assert lcs_align(template, response) == lcs_align_reference(template, response)


@pytest.mark.parametrize(
    ("template", "response", "length"),
    [
        ("abc", "abc", 3),
        ("ax", "ab", 0),  # column 0 is "equal or not", not a running maximum: a textbook LCS says 1
        ("xa", "ba", 1),
        ("abc", "xxabcxx", 3),
    ],
)
def test_lcs_length_quirks(template, response, length):
    assert lcs_align(template, response)[0] == length
    assert lcs_align_reference(template, response)[0] == length


def test_unmatched_template_chars_map_one_past():
    # s[i] = p on a match, p + 1 otherwise; the backtrack wraps p - 1 = -1 to the last column
    assert lcs_align("abc", "abc") == (3, [0, 1, 2])
    assert lcs_align_reference("a_c", "aXc") == lcs_align("a_c", "aXc")


TEMPLATE = "x = [blank];\ny = [blank];"


@pytest.mark.parametrize(
    ("targets", "response", "earned", "details"),
    [
        (
            ["5", "6"],
            "x = 5;\ny = 6;",
            2.0,
            ["matched: response string: 5, ans: 5", "matched: response string: 6, ans: 6"],
        ),
        # quotes, backticks and spaces are stripped; the default escape has no newline
        (["5", "6"], "x = '5';\ny = `6`;", 2.0, None),
        (
            ["5", "6"],
            "x = 5\n;\ny = 6;",
            1.0,
            ["unmatched: response string: 5\n, ans: 5", "matched: response string: 6, ans: 6"],
        ),
        # alternatives: the first that matches earns the weight
        ([{"content": ["4", "5"], "weight": 2.0}, "6"], "x = 5;\ny = 6;", 3.0, None),
        # a regex alternative must match the whole blank (fullmatch)
        ([{"content": [{"content": "\\d+", "regex": True}]}, "6"], "x = 55;\ny = 6;", 2.0, None),
        ([{"content": [{"content": "\\d", "regex": True}]}, "6"], "x = 55;\ny = 6;", 1.0, None),
        # substr_match: `in` instead of equality
        ([{"content": "5", "substr_match": True}, "6"], "x = 15;\ny = 6;", 2.0, None),
        ([{"content": "ABC", "to_lower": True}, "6"], "x = abc;\ny = 6;", 2.0, None),
        # dict content: only the literal key names are accepted (3-12-535 ...)
        (
            [{"content": {"or": ["5", "7"]}}, "6"],
            "x = 5;\ny = 6;",
            1.0,
            ["unmatched: response string: 5, ans: or", "matched: response string: 6, ans: 6"],
        ),
        ([{"content": {"or": ["5", "7"]}}, "6"], "x = or;\ny = 6;", 2.0, None),
        ([{"content": {"content": "5"}}, "6"], "x = content;\ny = 6;", 2.0, None),
    ],
)
def test_blank_targets(targets, response, earned, details):
    result = blanks(TEMPLATE, targets, response)
    assert result.earned == earned
    if details is not None:
        assert list(result.details) == details


def test_custom_escape_with_newline():
    result = blanks(TEMPLATE, ["5", "6"], "x = 5\n;\ny = 6;", escape=" \n")
    assert result.earned == 2.0


def test_low_match_rate_zeroes_every_blank():
    result = blanks(TEMPLATE, ["5", "6"], "The answer: x is 5 and y is 6.")
    assert result.match_rate < 0.8
    assert result.earned == 0.0 and result.total == 2.0
    assert all(d.startswith("unmatched: match rate too low - ") for d in result.details)


def test_prose_around_the_filled_template_counts_against_the_rate():
    filled = "x = 5;\ny = 6;"
    assert blanks(TEMPLATE, ["5", "6"], filled).match_rate == 1.0
    assert blanks(TEMPLATE, ["5", "6"], "Sure!\n" + filled).earned == 2.0  # LCS ignores extras
    assert blanks(TEMPLATE, ["5", "6"], "x = ").match_rate < 0.8


def test_custom_blank_str_and_empty_response():
    result = blanks("a ***blank*** b", ["z"], "", blank_str="***blank***")
    assert result.total == 1.0 and result.earned == 0.0  # "" is aligned as " "


def test_lowercasing_rebinds_the_blank_for_later_alternatives():
    result = blanks(TEMPLATE, [{"content": ["Q", "q"], "to_lower": True}, "6"], "x = Z;\ny = 6;")
    assert result.details[0] == "unmatched: response string: z, ans: q"


def test_post_handler_0_0_21(v21_suite):
    case = v21_suite.case("0-0-21")
    template = case.criteria.blank_filling.template
    good = template.replace("[blank]", "navigator.clipboard.writeText(this.text1);")
    assert grade_response(case, good).score == 1.0
    legacy = template.replace("[blank]", 'this.$refs.t.select(); document.execCommand("copy");')
    assert grade_response(case, legacy).score == 0.5
    assert grade_response(case, "navigator.clipboard.writeText").score == 0.0  # rate < 0.8
