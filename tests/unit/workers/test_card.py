"""workers/card.py: every registered benchmark has a card, it survives its stored JSON, and a
broken stored card is refused with the field that is wrong."""

from __future__ import annotations

import json

import pytest

from workers.benchmarks.registry import BENCHMARKS, get_benchmark
from workers.card import CardError, LiteratureFormat, MatchRule, card_from_json


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_benchmark_has_a_card_that_round_trips(name):
    card = get_benchmark(name).card
    assert card.benchmark == name
    assert card_from_json(card.to_json()) == card
    assert json.loads(card.to_json())["match_rule"] == card.match_rule.value
    assert card.k >= 1 and card.n_problems >= 1


def test_the_two_cards_say_what_the_report_reads():
    fix, infi = get_benchmark("humanevalfix").card, get_benchmark("infibench").card
    assert (fix.metric, fix.n_problems, fix.match_rule) == ("pass@1", 164, MatchRule.EXACT_COUNT)
    assert fix.scale == "percent of 164 problems" and fix.literature.startswith("reprogrid:")
    assert (infi.metric, infi.k, infi.n_problems) == ("best@10", 10, 234)
    assert infi.match_rule is MatchRule.SPREAD and infi.graded
    assert infi.scale == "percent of 234 questions"
    assert infi.literature == "data:infibench/leaderboard.csv"
    assert infi.literature_format is LiteratureFormat.LEADERBOARD


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda d: d.pop("metric"), "missing ['metric']"),
        (lambda d: d.update(colour="red"), "unknown ['colour']"),
        (lambda d: d.update(match_rule="vibes"), "'vibes' is not a valid MatchRule"),
    ],
)
def test_a_broken_stored_card_names_the_field(change, fragment):
    data = json.loads(get_benchmark("infibench").card.to_json())
    change(data)
    with pytest.raises(CardError) as info:
        card_from_json(json.dumps(data))
    assert fragment in str(info.value)
    with pytest.raises(CardError, match="not JSON"):
        card_from_json("{")
