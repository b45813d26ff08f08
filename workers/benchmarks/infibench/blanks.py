"""Blank filling (spec §4.2): the official `LCS` alignment and `blank_filling_match`, quirks kept.

The alignment is the official dynamic programme, not a textbook LCS:

* row 0 and column 0 are "1 if the characters are equal, else 0" (no running maximum);
* ties between left and up keep the larger (later) response index;
* the backtrack starts at `s_all[n-1][m-1]`, maps template position i to `p` on a match and to
  `p+1` otherwise, and on a match jumps to `s_all[i-1][p-1]`, where p-1 = -1 wraps to the last
  column (numpy indexing).

`lcs_align` computes the official tables one template row at a time with numpy (the tests
hold a line-by-line port, O(n·m) Python steps, as its oracle): inside a row,
(f, s) is a lexicographic running maximum that restarts at every matching character, which is a
segmented cumulative maximum over `f * m + s`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from workers.benchmarks.infibench.conditions import evaluate_condition
from workers.benchmarks.infibench.criteria import BlankFillingCriterion, BlankTarget

MIN_MATCH_RATE = 0.8  # below it, every blank is unmatched


@dataclass(frozen=True)
class BlankOutcome:
    earned: float
    total: float
    match_rate: float  # LCS length / (template length - blanks * len(blank_str))
    details: tuple[str, ...]  # the official detail strings, one per target


def backtrack(template: str, response: str, s_all) -> list[int]:
    n, m = len(template), len(response)
    s = [0] * n
    p = int(s_all[n - 1][m - 1])
    for i in range(n - 1, -1, -1):
        hit = template[i] == response[p]
        s[i] = p if hit else p + 1  # "lookahead for one char"
        if i > 0 and hit:
            p = int(s_all[i - 1][(p - 1) % m])  # numpy wraps index -1 to the last column
    return s


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def lcs_align(template: str, response: str) -> tuple[int, list[int]]:
    """The official LCS (f[n-1][m-1], s), vectorised over the response (numpy)."""
    n, m = len(template), len(response)
    resp = _codes(response)
    tmpl = _codes(template)
    cols = np.arange(m, dtype=np.int64)
    s_all = np.empty((n, m), dtype=np.int64)
    big = (n + 2) * m  # larger than any key f*m + s of one segment
    eq = resp == tmpl[0]
    f_row = eq.astype(np.int64)
    s_all[0] = np.where(eq, cols, 0)
    for i in range(1, n):
        eq = resp == tmpl[i]
        # Items of the row: a reset at j=0 and at each match, else the cell above.
        reset = eq.copy()
        reset[0] = True
        value = np.empty(m, dtype=np.int64)
        value[1:] = np.where(eq[1:], f_row[:-1] + 1, f_row[1:])
        value[0] = 1 if eq[0] else 0
        index = np.where(eq, cols, s_all[i - 1])
        index[0] = 0
        segment = np.cumsum(reset)
        key = value * m + index + segment * big
        key = np.maximum.accumulate(key) - segment * big
        f_row = key // m
        s_all[i] = key % m
    return int(f_row[m - 1]), backtrack(template, response, s_all)


def _target_outcome(target: BlankTarget, response_str: str, details: list[str]) -> tuple[bool, str]:
    """Whether the blank text earns the target, and the official detail string."""
    now_status = "unmatched"
    for alt in target.alternatives:
        ans_str = alt.text
        now_status = f"response string: {response_str}, ans: {ans_str}"
        if target.to_lower:
            # Rebinds response_str, so later alternatives' details show it lower-cased too.
            response_str, ans_str = response_str.lower(), ans_str.lower()
        if not target.substr_match:
            hit = (not alt.regex and response_str == ans_str) or (
                alt.regex and re.fullmatch(ans_str, response_str) is not None
            )
        else:
            hit = (not alt.regex and response_str.count(ans_str) > 0) or bool(
                alt.regex and re.search(ans_str, response_str)
            )
        if hit and (
            alt.cond is None
            or evaluate_condition(
                alt.cond,
                {
                    "grading_details": details,
                    "ans_str": ans_str,
                    "ans_re": alt.regex,
                    "response_str": response_str,
                },
            )
        ):
            return True, "matched: " + now_status
    return False, "unmatched: " + now_status


def match_blanks(criterion: BlankFillingCriterion, response: str) -> BlankOutcome:
    """Align the response to the template and score each blank (before any post_handler)."""
    response = criterion.prefix + response
    if response == "":
        response = " "  # the original's guard against the empty string
    template, blank_str = criterion.template, criterion.blank_str
    lcs_len, s = lcs_align(template, response)
    places = [i for i in range(len(template)) if template.startswith(blank_str, i)]
    rate = lcs_len / (len(template) - len(places) * len(blank_str))
    earned = total = 0.0
    details: list[str] = []
    for place, target in zip(places, criterion.targets, strict=True):
        total += target.weight
        if rate < MIN_MATCH_RATE:
            details.append(f"unmatched: match rate too low - {rate}")
            continue
        start = s[0] if place == 0 else s[place - 1] + 1
        response_str = response[start : s[place + len(blank_str)]].strip(criterion.escape)
        matched, detail = _target_outcome(target, response_str, details)
        if matched:
            earned += target.weight
        details.append(detail)
    return BlankOutcome(earned=earned, total=total, match_rate=rate, details=tuple(details))
