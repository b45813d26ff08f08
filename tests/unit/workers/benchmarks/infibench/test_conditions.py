"""The `cond:` mini-interpreter gives eval()'s answers on the supported subset."""

from __future__ import annotations

import pytest

from workers.benchmarks.infibench.conditions import UnsupportedCondition, evaluate_condition

VARS = {"ans": True, "context": ["match", "unmatch"], "response_str": "Hello"}


@pytest.mark.parametrize(
    "expr",
    [
        "context[-1].startswith('match')",
        'context[-1].startswith("match")',
        "context[0].startswith('match')",
        "ans and context[0] == 'match'",
        "not ans or len(context) > 1",
        "response_str.lower().count('l') == 2",
        "context[-2:] == ['match', 'unmatch']",
        "'un' in context[1] and 1 < 2 <= 2",
        "response_str.endswith('lo') and -1 < 0",
    ],
)
def test_same_as_eval(expr):
    assert evaluate_condition(expr, VARS) == eval(expr, {}, dict(VARS))  # noqa: S307


@pytest.mark.parametrize(
    "expr",
    ["__import__('os')", "open('x')", "context.append(1)", "(lambda: 1)()", "x", "a b"],
)
def test_unsupported(expr):
    with pytest.raises(UnsupportedCondition):
        evaluate_condition(expr, VARS)


def test_python_errors_surface():
    with pytest.raises(IndexError):
        evaluate_condition("context[-1].startswith('match')", {"context": []})
