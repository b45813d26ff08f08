from __future__ import annotations

import statistics

import pytest

from orchestrator.analysis.effects import (
    DEFAULT_BASELINE,
    effect_pairs,
    parse_baseline,
    precision_spread,
    summarize_effects,
    summarize_spread,
    template_kind,
)


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
    for bad, fragment in [("colour=red", "Unknown baseline axis"), ("decoding", "key=value"),
                          ("max_length=long", "integer")]:  # fmt: skip
        with pytest.raises(ValueError, match=fragment):
            parse_baseline([bad])


def point(model, score, tuning="instruct", template="own", decoding="greedy", max_length=2048,
          precision="bf16", backend="hf", variant="tests"):  # fmt: skip
    key = f"{model}|{template}|{decoding}|{max_length}|{precision}|{backend}|{variant}"
    return dict(key=key, model_name=model, tuning=tuning, template=template, decoding=decoding,
                max_length=max_length, precision=precision, backend=backend,
                benchmark="humanevalfix",
                variant=variant, length_semantics="total", limit=None, score_pct=score)  # fmt: skip


GRID = [
    point("a", 40.0), point("a", 30.0, template="instruct"), point("a", 36.0, decoding="t0.8"),
    point("a", 20.0, max_length=512), point("a", 40.0, precision="fp16"),
    point("a", 38.0, precision="int4"),
    point("a", 10.0, template="instruct", decoding="t0.8"),  # two axes changed: no pair
    point("a", 99.0, variant="docs", template="instruct"),  # other context: no pair
    point("b", 10.0, tuning="base"), point("b", 20.0, tuning="base", template="instruct"),
    point("b", 10.0, tuning="base", precision="fp16"),
    point("b", 12.0, tuning="base", precision="int4"),
    point("c", 0.0, tuning="base"), point("c", 5.0, tuning="base", template="instruct"),
]  # fmt: skip


def test_pairs_change_exactly_one_axis_from_the_baseline():
    pairs = effect_pairs(GRID, DEFAULT_BASELINE)
    got = sorted((p.model_name, p.axis, p.value, p.change_pp) for p in pairs)
    assert got == sorted([
        ("a", "template", "instruct", -10.0), ("a", "decoding", "t0.8", -4.0),
        ("a", "max_length", 512, -20.0), ("a", "precision", "fp16", 0.0),
        ("a", "precision", "int4", -2.0), ("b", "template", "instruct", 10.0),
        ("b", "precision", "fp16", 0.0), ("b", "precision", "int4", 2.0),
        ("c", "template", "instruct", 5.0),
    ])  # fmt: skip


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
    [summary] = summarize_spread(groups)
    assert summary.decoding == "greedy" and summary.n_groups == 2
    stds = [statistics.pstdev([40.0, 40.0, 38.0]), statistics.pstdev([10.0, 10.0, 12.0])]
    assert summary.mean_std_pp == pytest.approx(statistics.fmean(stds))
    assert summary.max_std_pp == pytest.approx(max(stds))
