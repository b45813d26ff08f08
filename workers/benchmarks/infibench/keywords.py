"""Keyword matching (spec §4.1), a port of `keyword_match` and the keywords branch of
`grade_response` with every quirk kept:

* plain rule: case-sensitive substring test on the raw response;
* `regex` is set on a node and inherited by its children; a regex test is `re.search` without
  flags;
* `to_lower` comes only from the top-level rule: keyword AND response are lower-cased, regex
  patterns included (so `\\S` becomes `\\s`);
* `cond` runs only after the node matched, with `ans` and `context` (the "match"/"unmatch"
  results of the previous top-level rules);
* a `neg` rule subtracts its weight on a match and adds nothing to the total.

The optional `post_handler` hook is applied by the caller (see grade.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workers.benchmarks.infibench.conditions import evaluate_condition
from workers.benchmarks.infibench.criteria import KeywordNode, KeywordRule, KeywordTerm

MATCH = "match"
UNMATCH = "unmatch"


@dataclass(frozen=True)
class KeywordOutcome:
    earned: float
    total: float
    statuses: tuple[str, ...]  # "match" / "unmatch" per rule, in order (the official detail)


def keyword_match(
    term: KeywordTerm, to_lower: bool, regex: bool, response: str, context: list[str]
) -> bool:
    """Does `term` match `response`? `context` holds the statuses of the previous rules."""
    if isinstance(term, str):
        if to_lower:
            term, response = term.lower(), response.lower()
        if regex:
            return re.search(term, response) is not None
        return term in response
    node: KeywordNode = term
    if node.regex is not None:
        regex = node.regex
    if node.any_of is not None:
        # A list comprehension in the original: every child is evaluated (no short circuit),
        # which matters only for errors raised by a later child.
        ans = any([keyword_match(c, to_lower, regex, response, context) for c in node.any_of])
    elif node.all_of is not None:
        ans = all([keyword_match(c, to_lower, regex, response, context) for c in node.all_of])
    else:
        assert node.content is not None  # guaranteed by the parser
        ans = keyword_match(node.content, to_lower, regex, response, context)
    if node.cond is not None:
        ans = ans and evaluate_condition(node.cond, {"ans": ans, "context": context})
    return bool(ans)


def match_keywords(rules: tuple[KeywordRule, ...], response: str) -> KeywordOutcome:
    """Earned points, possible points and per-rule statuses, before any post_handler."""
    earned = total = 0.0
    statuses: list[str] = []
    for rule in rules:
        # `statuses` is passed by reference, like the original's status['keywords'] list.
        if keyword_match(rule.content, rule.to_lower, False, response, statuses):
            statuses.append(MATCH)
            earned += -rule.weight if rule.neg else rule.weight
        else:
            statuses.append(UNMATCH)
        total += 0.0 if rule.neg else rule.weight
    return KeywordOutcome(earned=earned, total=total, statuses=tuple(statuses))
