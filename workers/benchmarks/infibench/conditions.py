"""The `cond:` expressions of keyword nodes and blank answers, evaluated without `eval`.

The official grader runs `eval(cond)` with its local variables in scope. Every `cond` in the
suites is `context[-1].startswith('match')` ("the previous top-level rule matched"), so a small
interpreter over a safe subset of Python expressions gives identical results without executing
suite text: names from the given variables, constants, lists and tuples, `and`/`or`/`not`,
comparisons, subscripts and slices, `len(...)`, and the string methods below. Anything else raises
`UnsupportedCondition` (which grades the case as an error, like a failing `eval` would).
Python semantics are kept, including errors: `context[-1]` on an empty list raises IndexError.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

STR_METHODS = frozenset(
    {"startswith", "endswith", "count", "find", "lower", "upper", "strip", "lstrip", "rstrip"}
)
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


class UnsupportedCondition(ValueError):
    """A `cond` uses Python beyond the supported expression subset."""


@lru_cache(maxsize=256)
def _parse(expr: str) -> ast.expr:
    try:
        return ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as e:
        raise UnsupportedCondition(f"invalid condition {expr!r}: {e.msg}") from e


def evaluate_condition(expr: str, variables: Mapping[str, Any]) -> Any:
    """Evaluate `expr` like `eval(expr)` with `variables` as its only names."""
    return _eval(_parse(expr), variables, expr)


def _eval(node: ast.expr, env: Mapping[str, Any], expr: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_eval(item, env, expr) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise UnsupportedCondition(f"unknown name {node.id!r} in condition {expr!r}")
    if isinstance(node, ast.BoolOp):
        value = None
        for operand in node.values:
            value = _eval(operand, env, expr)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, env, expr)
        if isinstance(node.op, ast.Not):
            return not operand
        if isinstance(node.op, ast.USub):
            return -operand
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, expr)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, env, expr)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Subscript):
        return _eval(node.value, env, expr)[_eval(node.slice, env, expr)]
    if isinstance(node, ast.Slice):
        parts = (node.lower, node.upper, node.step)
        return slice(*(None if p is None else _eval(p, env, expr) for p in parts))
    if isinstance(node, ast.Call) and not node.keywords:
        args = [_eval(a, env, expr) for a in node.args]
        if isinstance(node.func, ast.Name) and node.func.id == "len":
            return len(*args)
        if isinstance(node.func, ast.Attribute) and node.func.attr in STR_METHODS:
            target = _eval(node.func.value, env, expr)
            if isinstance(target, str):
                return getattr(target, node.func.attr)(*args)
    raise UnsupportedCondition(f"unsupported expression {ast.unparse(node)!r} in {expr!r}")
