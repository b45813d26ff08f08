"""Keyword rules and their quirks (spec §4.1, §6.1, §6.2, §6.9), on hand-made cases."""

from __future__ import annotations

import pytest

from tests.unit.workers.benchmarks.infibench.conftest import make_case
from workers.benchmarks.infibench.grade import grade_response
from workers.benchmarks.infibench.keywords import match_keywords
from workers.benchmarks.infibench.scores import ResponseStatus


def outcome(rules: list, response: str):
    case = make_case({"keywords": rules})
    assert case.criteria.keywords is not None
    return match_keywords(case.criteria.keywords.rules, response)


@pytest.mark.parametrize(
    ("rule", "response", "matched"),
    [
        ("Foo", "a Foo b", True),
        ("foo", "a Foo b", False),  # plain strings are case-sensitive
        ({"content": "FOO", "to_lower": True}, "a foo b", True),
        # to_lower inside a nested node is ignored (13 cases, 29 nodes in v2.1)
        ({"content": {"content": "FOO", "to_lower": True}}, "a foo b", False),
        # a top-level `regex` next to a string content is ignored: literal text (3-12-534)
        ({"content": "consumer[2-6]", "regex": True}, "consumer3", False),
        ({"content": "consumer[2-6]", "regex": True}, "consumer[2-6]", True),
        ({"content": {"content": "consumer[2-6]", "regex": True}}, "consumer3", True),
        # regex is searched without flags
        ({"content": {"content": "^b", "regex": True}}, "a\nb", False),
        # regex is inherited by the children of a node
        ({"content": {"or": ["x+y", "z\\d"], "regex": True}}, "z5", True),
        (
            {"content": {"or": ["x+y", {"content": "z\\d", "regex": False}], "regex": True}},
            "z5",
            False,
        ),
        # to_lower lower-cases the PATTERN too: \S becomes \s (0-1-137's [\s\S] -> [\s\s])
        ({"content": {"content": "\\S+@", "regex": True}}, "  @", False),
        ({"content": {"content": "\\S+@", "regex": True}, "to_lower": True}, "  @", True),
        ({"content": {"content": "A[\\S\\s]*B", "regex": True}}, "A-B", True),
        ({"content": {"content": "A[\\S\\s]*B", "regex": True}, "to_lower": True}, "a-b", False),
        # `or` wins over `and` when a node has both
        ({"content": {"or": ["a"], "and": ["a", "zzz"]}}, "a", True),
        ({"content": {"and": ["a", "b"]}}, "a b", True),
        ({"content": {"and": ["a", "c"]}}, "a b", False),
    ],
)
def test_single_rule(rule, response, matched):
    result = outcome([rule], response)
    assert result.statuses == (("match",) if matched else ("unmatch",))
    assert result.earned == (1.0 if matched else 0.0)
    assert result.total == 1.0


def test_nested_weight_is_ignored():
    # 1-3-202: totscore 2.0, not 1.5
    result = outcome([{"content": {"content": "x", "weight": 0.5}}, "y"], "x y")
    assert (result.earned, result.total) == (2.0, 2.0)


def test_top_level_weight_counts():
    result = outcome([{"content": "x", "weight": 2.5}, "y"], "x")
    assert (result.earned, result.total) == (2.5, 3.5)


@pytest.mark.parametrize(
    ("response", "statuses", "earned"),
    [
        ("alpha beta", ("match", "match"), 2.0),
        ("beta", ("unmatch", "unmatch"), 0.0),  # cond: only if the previous rule matched
        ("alpha", ("match", "unmatch"), 1.0),
    ],
)
def test_cond_reads_previous_rule(response, statuses, earned):
    rules = ["alpha", {"content": {"content": "beta", "cond": "context[-1].startswith('match')"}}]
    result = outcome(rules, response)
    assert (result.statuses, result.earned) == (statuses, earned)


def test_cond_is_not_evaluated_when_the_node_did_not_match():
    rule = {"content": {"content": "zzz", "cond": "context[-1].startswith('match')"}}
    assert outcome([rule], "abc").statuses == ("unmatch",)  # no IndexError on empty context


def test_cond_error_makes_the_case_an_error():
    case = make_case({"keywords": [{"content": {"content": "a", "cond": "context[-1] == 'x'"}}]})
    result = grade_response(case, "a")
    assert result.status is ResponseStatus.ERROR and result.score == 0.0
    assert "IndexError" in (result.error or "")


def test_neg_rule_subtracts_and_adds_nothing_to_the_total():
    rules = [
        {
            "content": {"content": "```[\\s\\S]*for *\\([\\s\\S]*```", "regex": True},
            "neg": True,
            "weight": 10.0,
        },
        "tidyverse",
    ]
    bad = "use tidyverse\n```r\nfor (i in 1:3) print(i)\n```"
    result = outcome(rules, bad)
    assert (result.statuses, result.earned, result.total) == (("match", "match"), -9.0, 1.0)
    # without min_score the response score is negative (1-4-322)
    assert grade_response(make_case({"keywords": rules}), bad).score == -9.0


def test_bad_escape_after_lowercasing_is_an_error():
    # \Z is valid, \z (after to_lower) is not: the official grader raises for the whole case
    case = make_case(
        {"keywords": [{"content": {"content": "end\\Z", "regex": True}, "to_lower": True}]}
    )
    assert grade_response(case, "the end").status is ResponseStatus.ERROR


def test_post_handler_0_0_1(v21_suite):
    case = v21_suite.case("0-0-1")
    # rules: framework preset / other+next.js / vercel.json / remove|delete
    full = "Framework Preset: Other, Next.js. Delete vercel.json"
    assert grade_response(case, full).score == 1.0  # +1 +1, rule 2 matched but 3 too
    only_json = "framework preset other nextjs vercel.json"
    assert grade_response(case, only_json).score == 0.5  # +1 +1 -1 = 1 of 2
    assert grade_response(case, "vercel.json").score == 0.0  # floored at 0
    detail = grade_response(case, full).metrics[0].detail
    assert detail == {
        "statuses": ["match", "match", "match", "match"],
        "post_handler_detail": {"status": "+1+1"},
    }
