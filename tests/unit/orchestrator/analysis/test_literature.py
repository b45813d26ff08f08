from __future__ import annotations

from fractions import Fraction

import pytest

from orchestrator.analysis.answers import Verdict, answer
from orchestrator.analysis.literature import (
    JoinRule,
    MatchStatus,
    SettingScore,
    join_literature,
    reproduction,
    tuning_confusion,
)
from orchestrator.analysis.literature_records import (
    MATCH_COLUMNS,
    match_record,
    obtainability_counts,
)
from orchestrator.analysis.obtainability import decimals_of, match_rule, obtainability
from storage.literature import LiteratureRow

EVERY = JoinRule(164)  # HumanEvalFix's problems, every setting of the reported variant
TESTS = JoinRule(164, ("tests",))  # ... and only the tests variant reported


def row(model: str, score: str, tuning: str = "base", line: int = 2) -> LiteratureRow:
    return LiteratureRow(line, model, "Fam", "1.3", tuning, score, "src", "title", "T1", "", "x")


def setting(
    model: str,
    k: int,
    n: int = 164,
    tuning: str = "base",
    label: str = "s",
    family: str = "fam",
    size: float = 1.3,
    samples: int = 1,
    variant: str = "tests",
    rank: int = 0,
) -> SettingScore:
    return SettingScore(
        key=f"{model}-{label}-{variant}",
        model_name=model,
        model_family=family,
        model_size_b=size,
        tuning=tuning,
        label=label,
        score=Fraction(k, n * samples),
        n_problems=n,
        variant=variant,
        rank=rank,
    )


@pytest.mark.parametrize(
    ("text", "decimals"), [("44.9", 1), ("14.0", 1), ("47", 0), ("45.12", 2), (" 9.10 ", 2)]
)
def test_decimals_come_from_the_printed_text(text, decimals):
    assert decimals_of(text) == decimals


@pytest.mark.parametrize(
    ("value", "ks_round", "ks_floor"),
    [
        ("44.9", (), ()),  # 73/164 = 44.51, 74/164 = 45.12: not obtainable (the study's example)
        ("45.12", (74,), (74,)),  # 74/164 = 45.1219...
        ("45.1", (74,), (74,)),
        ("16.4", (), (27,)),  # 27/164 = 16.463...: floors to 16.4, rounds to 16.5
        ("16.5", (27,), ()),
        ("1.2", (2,), (2,)),
        ("48.9", (), ()),  # 80/164 = 48.78, 81/164 = 49.39
        ("47", (77,), (78,)),  # 46.95 rounds to 47; 47.56 floors to 47
        ("0.0", (0,), (0,)),
        ("100.0", (164,), (164,)),
        ("25.0", (41,), (41,)),  # exact
        ("30.4", (), (50,)),  # 30.49: floored (the OctoPack value was sampled, n=20)
    ],
)
def test_obtainability_by_rounding_or_flooring(value, ks_round, ks_floor):
    result = obtainability(value, 164)
    assert result.ks_round == ks_round
    assert result.ks_floor == ks_floor
    assert result.obtainable == bool(ks_round or ks_floor)


def test_unobtainable_values_name_the_neighbours():
    result = obtainability("44.9", 164)
    assert (result.below, result.above) == (73, 74)
    assert result.describe() == "no k/164: 73/164 = 44.51, 74/164 = 45.12"
    assert obtainability("45.12", 164).describe() == "74/164 (round, floor)"


def test_obtainability_with_another_problem_count():
    assert obtainability("20", 5).ks == (1,)
    assert not obtainability("30", 5).obtainable
    assert obtainability("50.0", 2).ks == (1,)
    with pytest.raises(ValueError):
        obtainability("1.0", 0)


@pytest.mark.parametrize(
    ("score", "value", "rule"),
    [
        (Fraction(74, 164), "45.1", "round"),
        (Fraction(74, 164), "45.12", "round"),
        (Fraction(27, 164), "16.4", "floor"),
        (Fraction(27, 164), "16.5", "round"),
        (Fraction(73, 164), "44.9", None),
        (Fraction(74, 164), "44.9", None),
        (Fraction(1, 8), "12.5", "round"),  # exact value: both apply, round wins
        (Fraction(1, 8), "13", "round"),  # a tie (12.5 -> 13) counts for rounding
        (Fraction(1, 8), "12", "round"),  # ... and so does 12.5 -> 12 (half-even, half-down)
        (Fraction(129, 1000), "12", "floor"),  # 12.9: truncated to 12, never rounded to it
        (Fraction(6073, 20 * 164 * 10), "18.5", "round"),  # sampled: 18.5152...
    ],
)
def test_match_rule(score, value, rule):
    assert match_rule(score, value) == rule


def test_every_reproducing_setting_is_listed_with_near_and_closest():
    settings = [
        setting("m", 2, label="a"),  # 1.22 -> rounds to 1.2
        setting("m", 2, label="b"),  # the same score, another setting
        setting("m", 1, label="c"),  # 0.61: within one problem (0.61 pp) of 1.2
        setting("m", 9, label="d"),  # 5.49
    ]
    result = reproduction("1.2", settings)
    assert [(s.label, rule) for s, rule in result.reproduced_by] == [("a", "round"), ("b", "round")]
    assert [s.label for s in result.near] == ["c"]
    assert result.status == "reproduced"
    assert result.closest.label == "a"
    assert result.closest_gap_pp == pytest.approx(200 / 164 - 1.2)


def test_near_and_not_reproduced_and_the_gap():
    near = reproduction("44.9", [setting("m", 73, label="x"), setting("m", 60, label="y")])
    assert near.status == "near" and [s.label for s in near.near] == ["x"]
    assert near.closest.label == "x"
    assert near.closest_gap_pp == pytest.approx(7300 / 164 - 44.9)
    far = reproduction("30.0", [setting("m", 10, label="x"), setting("m", 20, label="y")])
    assert far.status == "not reproduced" and far.near == ()
    assert far.closest.label == "y" and far.closest_gap_pp == pytest.approx(2000 / 164 - 30)
    none = reproduction("30.0", [])
    assert none.status == "no settings" and none.closest is None and none.closest_gap_pp is None


def test_sampled_settings_match_on_their_unbiased_pass1():
    # n = 20 samples per problem: 996 passing samples of 3280 = 30.365...% -> floors to 30.3,
    # rounds to 30.4 (the OctoCoder value)
    sampled = setting("octocoder", 996, samples=20, label="t0.2")
    assert reproduction("30.4", [sampled]).reproduced_by[0][1] == "round"


BASE, INST = "dsc-1.3b-base", "dsc-1.3b-instruct"


@pytest.mark.parametrize(
    ("own_k", "other_k", "flag"),
    [
        ((2, 5), (27,), True),  # DeepSeekCoder-1.3B: base 16.4 reproduced only by the instruct
        ((27,), (27,), False),  # both reproduce: no confusion
        ((2,), (3,), False),  # neither
        ((27,), (2,), False),  # only its own model
    ],
)
def test_tuning_confusion_base_value(own_k, other_k, flag):
    own = reproduction("16.4", [setting(BASE, k, label=str(k)) for k in own_k])
    other = reproduction(
        "16.4", [setting(INST, k, tuning="instruct", label=str(k)) for k in other_k]
    )
    assert tuning_confusion(own, other) is flag


def test_tuning_confusion_needs_both_models():
    other = reproduction("16.4", [setting(INST, 27, tuning="instruct")])
    assert tuning_confusion(None, other) is False
    assert tuning_confusion(reproduction("16.4", []), other) is False
    assert tuning_confusion(reproduction("16.4", [setting(BASE, 2)]), None) is False


def test_join_flags_codellama_13b_reported_for_base_but_reproduced_by_instruct():
    # 33.1 for the base CodeLlama-13B is no k/164; a sampled instruct setting gives it.
    settings = [
        setting("codellama-13b-base", 10, label="own", family="codellama", size=13),
        setting(
            "codellama-13b-instruct",
            1086,
            samples=20,
            tuning="instruct",
            label="t0.2",
            family="codellama",
            size=13,
        ),
    ]
    mapping = {"CodeLlama 13B": "codellama-13b-base"}
    [match] = join_literature([row("CodeLlama 13B", "33.1")], mapping, settings, EVERY)
    assert not match.obtainability.obtainable
    assert match.status == "not reproduced"
    assert match.counterpart_model == "codellama-13b-instruct"
    assert match.tuning_confusion
    record = match_record(match)
    assert record["tuning_confusion"] is True
    assert record["counterpart_reproduced_by"] == "codellama-13b-instruct: t0.2"


def test_join_keeps_unmapped_and_not_run_rows_in_order():
    rows = [
        row("Nobody-7B", "12.2", line=2),
        row("Mapped", "1.2", line=3),
        row("Known", "5.5", line=4),
    ]
    mapping = {"Mapped": BASE, "Known": "some-model"}
    matches = join_literature(rows, mapping, [setting(BASE, 2)], EVERY)
    assert [m.status for m in matches] == ["unmapped", "reproduced", "not in store"]
    assert [m.row.line for m in matches] == [2, 3, 4]
    assert matches[1].counterpart_model is None and not matches[1].tuning_confusion


# -- sampling and pilots (Trust §2, §3) ---------------------------------------------------------


def test_a_value_from_20_samples_is_obtainable_at_its_own_granularity():
    """OctoPack's StarCoder 8.7 (n=20): no k/164 gives it, 285/3280 does."""
    assert not obtainability("8.7", 164, 1).obtainable
    sampled = obtainability("8.7", 164, 20)
    assert sampled.obtainable and 285 in sampled.ks and sampled.verdict == "obtainable"
    assert sampled.describe() == "284/3280 .. 288/3280 (round or floor; 20 samples x 164)"


def test_unknown_sampling_is_never_called_plainly_unobtainable():
    unknown = obtainability("44.9", 164, None)
    assert not unknown.obtainable
    assert unknown.verdict == "not obtainable with one sample per problem"
    assert obtainability("44.9", 164, 1).verdict == "not obtainable"


def test_the_note_of_an_unobtainable_value_says_with_which_sampling():
    """The answers row's note: none for an obtainable value; the sampling, whether the source
    stated it, and the two nearest scores otherwise."""
    assert obtainability("45.12", 164, None).note() is None
    assert obtainability("44.9", 164, None).note() == (
        "not obtainable with one sample per problem (its source does not say how it sampled): "
        "no k/164 gives 44.9; nearest 73/164 = 44.51, 74/164 = 45.12"
    )
    assert obtainability("44.9", 164, 1).note() == (
        "not obtainable with one sample per problem (as its source states): no k/164 gives "
        "44.9; nearest 73/164 = 44.51, 74/164 = 45.12"
    )
    # 20 samples: steps of 100/3280 points; 285/3280 = 8.689 and 286/3280 = 8.7195 neither
    # round (8.69, 8.72) nor truncate (8.68, 8.71) to 8.70
    assert obtainability("8.70", 164, 20).note() == (
        "not obtainable with 20 samples per problem (as its source states): no k/3280 gives "
        "8.70; nearest 285/3280 = 8.69, 286/3280 = 8.72"
    )


def test_the_join_uses_the_rows_stated_sampling():
    rows = [
        LiteratureRow(
            2, "StarCoder", "f", "15.5", "base", "8.7", "octopack", "t", "T", "", "x", n_samples=20
        ),
        LiteratureRow(3, "StarCoder", "f", "15.5", "base", "8.7", "other", "t", "T", "", "x"),
    ]
    matches = join_literature(rows, {}, [], EVERY)
    assert [m.obtainability.verdict for m in matches] == [
        "obtainable",
        "not obtainable with one sample per problem",
    ]
    counts = obtainability_counts(matches)
    assert counts == {
        "values": 2,
        "obtainable": 1,
        "not obtainable": 0,
        "not obtainable with one sample per problem": 1,
    }


def pilot(model: str, k: int, n: int, total: int = 164, label: str = "pilot") -> SettingScore:
    return SettingScore(
        key=f"{model}-{label}",
        model_name=model,
        model_family="fam",
        model_size_b=1.3,
        tuning="instruct",
        label=label,
        score=Fraction(k, n),
        n_problems=n,
        n_problems_total=total,
    )


def test_a_pilot_is_never_reproduced_near_or_closest():
    """A 10-problem setting scoring 3/10 = 30.0 would 'reproduce' 30.0: it must not."""
    small = pilot("m", 3, 10)
    assert small.pilot and small.subset == "subset (10 of 164)"
    only = reproduction("30.0", [small])
    assert only.reproduced_by == () and only.near == () and only.closest is None
    assert only.status == "only a pilot subset" and only.pilots == (small,)
    full = setting("m", 40, label="full")  # 24.39
    both = reproduction("30.0", [small, full])
    assert both.status == "not reproduced" and both.closest is full and both.pilots == (small,)


def test_the_join_lists_pilots_with_the_reason_and_gives_them_no_verdict():
    rows = [row("M", "30.0", tuning="instruct")]
    matches = join_literature(
        rows, {"M": "m"}, [pilot("m", 3, 10), setting("m", 40, label="f")], EVERY
    )
    record = match_record(matches[0])
    assert record["status"] == "not reproduced" and record["closest_setting"] == "f"
    assert record["pilots"] == "not compared (a subset of the problems): pilot subset (10 of 164)"
    only = match_record(join_literature(rows, {"M": "m"}, [pilot("m", 3, 10)], EVERY)[0])
    assert only["status"] == "only a pilot subset" and only["n_reproducing"] == 0
    assert only["closest_setting"] is None


# -- answers: verdicts, variant confusion, the best-matching setting -----------------------------


def test_the_best_setting_is_the_closest_reproducing_one_then_the_grids_first():
    settings = [
        setting("m", 27, label="far", rank=3),  # 16.46: floors to 16.4
        setting("m", 27, label="tie", rank=1),  # the same score, earlier in the grid
        setting("m", 30, label="other", rank=0),  # 18.29: not reproduced
    ]
    result = reproduction("16.4", settings)
    assert [s.label for s, _ in result.reproduced_by] == ["tie", "far"]  # grid order
    assert result.best().label == "tie"
    assert float(result.gap(result.best())) == pytest.approx(2700 / 164 - 16.4)
    near = reproduction("18.0", settings)  # nothing gives 18.0: the closest (18.29) is best
    assert near.status == MatchStatus.NEAR and near.best().label == "other"


def test_a_value_only_the_docs_variant_reproduces_is_a_variant_confusion():
    settings = [
        setting("m", 10, label="tests-own"),
        setting("m", 27, label="docs-own", variant="docs"),
    ]
    [match] = join_literature([row("M", "16.4")], {"M": "m"}, settings, TESTS)
    assert match.status == MatchStatus.NOT_REPRODUCED  # its own variant's verdict
    assert match.other_variant == "docs" and match.variant_confusion
    assert not match.tuning_confusion
    got = answer(match)
    assert got.verdict is Verdict.VARIANT_CONFUSION and got.n_reproducing == 1
    assert got.setting.label == "docs-own" and got.setting.variant == "docs"
    assert got.text == "variant confusion: reproduced by 1 setting of the docs variant"
    record = match_record(match)
    assert list(record) == list(MATCH_COLUMNS)
    assert record["other_variant_reproduced_by"] == "m: docs-own"


def test_the_docs_variant_is_never_the_models_own_and_needs_its_tests_settings():
    docs_only = [setting("m", 27, label="docs-own", variant="docs")]
    [match] = join_literature([row("M", "16.4")], {"M": "m"}, docs_only, TESTS)
    assert match.own is None and match.status == MatchStatus.OTHER_VARIANT_ONLY
    assert answer(match) is None
    both = docs_only + [setting("m", 27, label="tests-own")]
    [match] = join_literature([row("M", "16.4")], {"M": "m"}, both, TESTS)
    assert answer(match).verdict is Verdict.REPRODUCED and not match.variant_confusion


@pytest.mark.parametrize(
    ("own_k", "partner_k", "docs_k", "verdict", "text"),
    [
        ((27, 27), (), (), Verdict.REPRODUCED, "reproduced by 2 settings"),
        (
            (10,),
            (27,),
            (27,),
            Verdict.TUNING_CONFUSION,
            "tuning confusion: reproduced by 1 setting of dsc-1.3b-instruct",
        ),
        ((26,), (), (), Verdict.NEAR, "near"),
        ((10,), (), (), Verdict.NOT_REPRODUCED, "not reproduced"),
    ],
)
def test_answer_verdicts(own_k, partner_k, docs_k, verdict, text):
    settings = [setting(BASE, k, label=f"own{i}") for i, k in enumerate(own_k)]
    settings += [setting(INST, k, tuning="instruct", label="p") for k in partner_k]
    settings += [setting(BASE, k, label="d", variant="docs") for k in docs_k]
    [match] = join_literature([row("B", "16.4")], {"B": BASE}, settings, TESTS)
    got = answer(match)
    assert got.verdict is verdict and got.text == text
    expected_gap = float(got.setting.score * 100 - Fraction(164, 10))
    assert got.gap_pp == pytest.approx(expected_gap)


def test_a_pilot_only_value_has_no_best_setting():
    [match] = join_literature([row("M", "30.0")], {"M": "m"}, [pilot("m", 3, 10)], EVERY)
    got = answer(match)
    assert got.verdict is Verdict.PILOT_ONLY and got.setting is None and got.gap_pp is None
    assert got.text == "only a pilot subset"
