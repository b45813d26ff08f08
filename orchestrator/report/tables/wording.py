"""What the report's sentences say about a benchmark, from its card (workers/card.py).

Every description, header and axis label that names a metric, a problem count or a matching
rule is built here from the cards of the store's benchmarks, so that an InfiBench report speaks
of best@10 in percent of 234 questions and of the leaderboard's spread, a HumanEvalFix report of
pass@1 and k/(164 x samples), and a store holding both of each against its own literature. The
report branches on a card's match rule, never on a benchmark's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from workers.card import BenchmarkCard, MatchRule


def _each(cards: Sequence[BenchmarkCard], phrase: Callable[[BenchmarkCard], str]) -> str:
    """One card's phrase, or each card's, named by its title ("A: x; B: y")."""
    if len(cards) == 1:
        return phrase(cards[0])
    return "; ".join(f"{c.title}: {phrase(c)}" for c in cards)


def metric(cards: Sequence[BenchmarkCard]) -> str:
    """ "pass@1", "best@10", or "the headline metric (HumanEvalFix-Python: pass@1; ...)"."""
    names = sorted({c.metric for c in cards})
    if len(names) == 1:
        return names[0]
    if not cards:
        return "the headline metric"
    return f"the headline metric ({_each(cards, lambda c: c.metric)})"


def metric_label(cards: Sequence[BenchmarkCard]) -> str:
    """An axis label or column header: "pass@1", "best@10", or "score" for several."""
    names = sorted({c.metric for c in cards})
    return names[0] if len(names) == 1 else "score"


def _reproduced(card: BenchmarkCard) -> str:
    if card.match_rule is MatchRule.SPREAD:
        return (
            f"the gap between a setting's {card.metric} and the value is within the spread of "
            "repeated runs: the leaderboard's std over sample groups and the setting's, at the "
            "report's confidence"
        )
    return f"a setting's {card.metric} rounds or truncates to the value at its printed decimals"


def _near(card: BenchmarkCard) -> str:
    if card.match_rule is MatchRule.SPREAD:
        return f"the value lies inside the setting's interval over {card.unit}s"
    return f"within one {card.unit}"


def _matching(card: BenchmarkCard) -> str:
    if card.match_rule is MatchRule.SPREAD:
        return (
            f"its spread over repeated runs (std over groups of samples per {card.unit}, "
            "responses per question as reported; a fractional score is no count k/n)"
        )
    return (
        f"whether some k/({card.n_problems} x samples) gives it (with the samples per "
        f"{card.unit} its source states, else one)"
    )


def reproduced(cards: Sequence[BenchmarkCard]) -> str:
    """When a setting reproduces a reported value, per card."""
    return _each(cards, _reproduced) if cards else "no benchmark card: nothing compared"


def near(cards: Sequence[BenchmarkCard]) -> str:
    return _each(cards, _near) if cards else "-"


def matching(cards: Sequence[BenchmarkCard]) -> str:
    """What is said of each reported value before it is compared."""
    return _each(cards, _matching) if cards else "-"


def _scale(card: BenchmarkCard, scored: Sequence[int]) -> str:
    counts = sorted(set(scored))
    if not counts or counts == [card.n_problems]:
        return card.scale
    total = f"the benchmark's {card.n_problems}"
    if len(counts) == 1:
        subset = f", a subset of {total}" if counts[0] < card.n_problems else ""
        return f"percent of {counts[0]} {card.unit}s{subset}"
    numbers = ", ".join(map(str, counts[:-1])) + f" or {counts[-1]}"
    return f"percent of each setting's {card.unit}s: {numbers} of {total}"


def scale(cards: Sequence[BenchmarkCard], scored: Mapping[str, Sequence[int]]) -> str:
    """ "percent of 164 problems"; several: each card's. `scored`: benchmark -> the numbers of
    problems its scored settings hold, which the scale names when they are not the card's (a
    store of 20-problem pilots is in percent of 20 problems, not of 164)."""
    if not cards:
        return "percent"
    return _each(cards, lambda c: _scale(c, scored.get(c.benchmark, ())))


def headline(cards: Sequence[BenchmarkCard]) -> str:
    """How the grid's score is computed, per card."""
    return _each(cards, lambda c: c.metric_description) if cards else "-"


def counted(cards: Sequence[BenchmarkCard]) -> list[BenchmarkCard]:
    """The cards whose values are counts k/n (the exact count rule)."""
    return [c for c in cards if c.match_rule is MatchRule.EXACT_COUNT]
