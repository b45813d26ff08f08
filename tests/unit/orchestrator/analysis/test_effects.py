from __future__ import annotations

import statistics

import pytest

from orchestrator.analysis.baseline import (
    DEFAULT_BASELINE,
    BaselineError,
    check_baseline_in_store,
    parse_baseline,
)
from orchestrator.analysis.effects import (
    cells,
    effect_pairs,
    model_votes,
    summarize_effects,
    template_kind,
)
from orchestrator.analysis.spread import precision_spread, summarize_spread


@pytest.mark.parametrize(
    ("template", "own", "kind"),
    [
        ("deepseek", "deepseek", "own"),
        ("instruct", "deepseek", "instruct"),
        ("chat", "deepseek", "chat"),
        ("octocoder", "deepseek", "octocoder"),
        ("instruct", "instruct", "own"),  # the model's own template is the harness's instruct
        ("deepseek", None, "own"),  # config unknown: not instruct/chat -> own
        ("instruct", None, "instruct"),
        ("chat", None, "chat"),
    ],
)
def test_template_kind(template, own, kind):
    assert template_kind(template, own) == kind


def test_parse_baseline():
    assert parse_baseline([]) == DEFAULT_BASELINE
    changed = parse_baseline(["decoding=t0.8", "max_length=512", "backend=vllm"])
    assert changed == {**DEFAULT_BASELINE, "decoding": "t0.8", "max_length": 512, "backend": "vllm"}
    assert "precision" not in parse_baseline(["precision=*"])
    for bad, fragment in [
        ("colour=red", "Unknown baseline axis"),
        ("decoding", "key=value"),
        ("max_length=long", "integer"),
    ]:
        with pytest.raises(ValueError, match=fragment):
            parse_baseline([bad])


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            "templte=own",
            "Unknown baseline axis 'templte'. Did you mean: template? Valid: "
            "template, decoding, max_length, precision, backend",
        ),
        (
            "precision=int3",
            "Unknown baseline precision 'int3'. Did you mean: int8? Valid: "
            "bf16, fp16, fp32, int8, int4",
        ),
        ("max_length=0", "baseline max_length must be a positive integer, got '0'"),
    ],
)
def test_a_bad_baseline_names_the_value_a_suggestion_and_the_valid_ones(item, message):
    with pytest.raises(BaselineError) as caught:
        parse_baseline([item])
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, ValueError)  # the CLI's exit status 2


def test_a_backend_baseline_is_checked_against_the_stores_backends():
    """Backends are the registry's (the analysis wing names none): a typo is caught against
    the values the store holds."""
    baseline = parse_baseline(["backend=vlm"])
    with pytest.raises(BaselineError, match=r"backend 'vlm'\. Did you mean: vllm\?"):
        check_baseline_in_store(baseline, {"backend": {"hf", "vllm"}})


def test_a_chosen_baseline_value_must_be_in_the_store():
    present = {
        "template": {"own", "instruct"},
        "decoding": {"greedy", "t0.8"},
        "precision": {"fp16"},
    }
    check_baseline_in_store(DEFAULT_BASELINE, present)  # the default: never refused
    check_baseline_in_store(parse_baseline(["decoding=t0.8"]), present)
    with pytest.raises(
        BaselineError,
        match=r"template 'instrct'\. Did you mean: instruct\? "
        "Values in the store: instruct, own",
    ):
        check_baseline_in_store(parse_baseline(["template=instrct"]), present)
    check_baseline_in_store(parse_baseline(["template=instrct"]), {})  # an empty store


def point(
    model,
    score,
    tuning="instruct",
    template="own",
    decoding="greedy",
    max_length=2048,
    precision="bf16",
    backend="hf",
    variant="tests",
):
    key = f"{model}|{template}|{decoding}|{max_length}|{precision}|{backend}|{variant}"
    return dict(
        key=key,
        model_name=model,
        tuning=tuning,
        template=template,
        decoding=decoding,
        max_length=max_length,
        precision=precision,
        backend=backend,
        benchmark="humanevalfix",
        variant=variant,
        length_semantics="total",
        limit=None,
        score_pct=score,
    )


GRID = [
    point("a", 40.0),
    point("a", 30.0, template="instruct"),
    point("a", 36.0, decoding="t0.8"),
    point("a", 20.0, max_length=512),
    point("a", 40.0, precision="fp16"),
    point("a", 38.0, precision="int4"),
    point("a", 10.0, template="instruct", decoding="t0.8"),  # two axes changed: no pair
    point("a", 99.0, variant="docs", template="instruct"),  # other context: no pair
    point("b", 10.0, tuning="base"),
    point("b", 20.0, tuning="base", template="instruct"),
    point("b", 10.0, tuning="base", precision="fp16"),
    point("b", 12.0, tuning="base", precision="int4"),
    point("c", 0.0, tuning="base"),
    point("c", 5.0, tuning="base", template="instruct"),
]


def test_pairs_change_exactly_one_axis_from_the_baseline():
    pairs = effect_pairs(GRID, DEFAULT_BASELINE)
    got = sorted((p.model_name, p.axis, p.value, p.change_pp) for p in pairs)
    assert got == sorted(
        [
            ("a", "template", "instruct", -10.0),
            ("a", "decoding", "t0.8", -4.0),
            ("a", "max_length", 512, -20.0),
            ("a", "precision", "fp16", 0.0),
            ("a", "precision", "int4", -2.0),
            ("b", "template", "instruct", 10.0),
            ("b", "precision", "fp16", 0.0),
            ("b", "precision", "int4", 2.0),
            ("c", "template", "instruct", 5.0),
        ]
    )


def test_summary_over_all_and_instruct_models():
    rows = {
        (r.axis, r.value, r.group): r
        for r in summarize_effects(effect_pairs(GRID, DEFAULT_BASELINE))
    }
    template = rows[("template", "instruct", "all")]
    assert template.n_models == 3 and template.baseline_value == "own"
    assert template.mean_change_pp == pytest.approx((-10 + 10 + 5) / 3)
    assert template.mean_abs_change_pp == pytest.approx((10 + 10 + 5) / 3)
    # model c's baseline scores 0: left out of the relative change
    assert template.n_relative == 2
    assert template.mean_relative_change_pct == pytest.approx((-25.0 + 100.0) / 2)
    instruct = rows[("template", "instruct", "instruct")]
    assert (instruct.n_models, instruct.mean_change_pp) == (1, -10.0)
    assert ("decoding", "t0.8", "all") in rows and ("max_length", 512, "instruct") in rows
    int4 = rows[("precision", "int4", "all")]
    assert int4.mean_change_pp == pytest.approx(0.0) and int4.mean_abs_change_pp == pytest.approx(
        2.0
    )
    order = [(r.axis, r.value) for r in summarize_effects(effect_pairs(GRID, DEFAULT_BASELINE))]
    assert order.index(("precision", "fp16")) < order.index(("precision", "int4"))


def test_a_changed_baseline_and_a_freed_axis():
    baseline = parse_baseline(["template=instruct"])
    pairs = effect_pairs(GRID, baseline)
    assert {(p.model_name, p.axis, p.value) for p in pairs} >= {("a", "decoding", "t0.8")}
    assert all(p.baseline_value == "instruct" for p in pairs if p.axis == "template")
    freed = effect_pairs(GRID, parse_baseline(["template=*"]))
    assert not any(p.axis == "template" for p in freed)


def test_precision_spread_is_the_population_std_per_group():
    groups = precision_spread(GRID)
    by_model = {g.model_name: g for g in groups}
    assert set(by_model) == {"a", "b"}
    assert by_model["a"].precisions == ("bf16", "fp16", "int4")
    assert by_model["a"].std_pp == pytest.approx(statistics.pstdev([40.0, 40.0, 38.0]))
    assert (by_model["b"].min_pct, by_model["b"].max_pct) == (10.0, 12.0)
    summary = {s.group: s for s in summarize_spread(groups)}
    assert set(summary) == {"all", "instruct"}
    stds = [statistics.pstdev([40.0, 40.0, 38.0]), statistics.pstdev([10.0, 10.0, 12.0])]
    assert summary["all"].decoding == "greedy" and summary["all"].n_groups == 2
    assert summary["all"].mean_std_pp == pytest.approx(statistics.fmean(stds))
    assert summary["all"].max_std_pp == pytest.approx(max(stds))
    assert summary["instruct"].n_models == 1  # only model a is instruction-tuned
    assert summary["instruct"].mean_std_pp == pytest.approx(stds[0])
    assert summary["all"].increase_vs_greedy_pct is None


# -- one vote per model -------------------------------------------------------------------------


DUPLICATES = [
    point("m", 10.0),
    point("m", 14.0),  # two baselines of one cell (e.g. n_samples 1 and 4)
    point("m", 20.0, precision="int4"),
    point("m", 30.0, precision="int4", backend="vllm"),
    point("m", 28.0, backend="vllm"),
    point("n", 50.0),
    point("n", 40.0, precision="int4"),
]


def test_settings_of_one_cell_are_one_measurement_at_their_mean():
    [m_base] = [
        c
        for c in cells(DUPLICATES)
        if c.model_name == "m" and c.value("backend") == "hf" and c.value("precision") == "bf16"
    ]
    assert m_base.score_pct == 12.0 and len(m_base.keys) == 2


def test_each_model_votes_once_per_axis_value():
    """m: a cell with two baselines (mean 12) on hf, and a vLLM pair; n: one pair."""
    pairs = effect_pairs(DUPLICATES, DEFAULT_BASELINE)  # backend free: hf and vllm pairs
    assert sorted(p.change_pp for p in pairs if p.model_name == "m") == [2.0, 8.0]
    [vote_m] = [v for v in model_votes(pairs) if v.model_name == "m"]
    assert vote_m.n_pairs == 2 and vote_m.change_pp == pytest.approx(5.0)
    assert vote_m.relative_pct == pytest.approx((8 / 12 + 2 / 28) * 100 / 2)
    [row] = [r for r in summarize_effects(pairs) if r.group == "all"]
    assert (row.n_models, row.n_pairs) == (2, 3)
    assert row.mean_change_pp == pytest.approx((5.0 + -10.0) / 2)  # not (8 + 2 - 10) / 3
    assert row.mean_abs_change_pp == pytest.approx((5.0 + 10.0) / 2)
    assert row.mean_relative_change_pct == pytest.approx((vote_m.relative_pct - 20.0) / 2)


def test_the_spread_counts_a_model_once_and_compares_sampling_with_greedy():
    rows = [
        point("m", 10.0),
        point("m", 14.0, precision="fp16"),  # greedy: std 2
        point("m", 10.0, template="instruct"),
        point("m", 12.0, template="instruct", precision="fp16"),  # greedy: std 1
        point("m", 10.0, decoding="t0.8"),
        point("m", 16.0, decoding="t0.8", precision="fp16"),
        point("m", 16.0, decoding="t0.8", precision="fp16"),  # a duplicate: one cell
        point("n", 10.0, tuning="base"),
        point("n", 20.0, tuning="base", precision="fp16"),
    ]
    summary = {(s.decoding, s.group): s for s in summarize_spread(precision_spread(rows))}
    greedy = summary[("greedy", "all")]
    assert (greedy.n_models, greedy.n_groups) == (2, 3)
    assert greedy.mean_std_pp == pytest.approx((1.5 + 5.0) / 2)  # m votes (2 + 1) / 2
    assert greedy.max_std_pp == pytest.approx(5.0)
    assert summary[("greedy", "instruct")].mean_std_pp == pytest.approx(1.5)
    sampled = summary[("t0.8", "instruct")]
    assert sampled.mean_std_pp == pytest.approx(3.0)
    assert sampled.increase_vs_greedy_pct == pytest.approx((3.0 - 1.5) / 1.5 * 100)
    assert summary[("t0.8", "all")].increase_vs_greedy_pct == pytest.approx(
        (3.0 - 3.25) / 3.25 * 100
    )
