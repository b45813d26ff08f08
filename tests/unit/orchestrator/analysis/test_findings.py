"""The findings' sentences against values worked out by hand from outcomes built to have them."""

from __future__ import annotations

import hashlib
from statistics import NormalDist

import numpy as np
import pytest

from orchestrator.analysis.baseline import DEFAULT_BASELINE
from orchestrator.analysis.evidence import EvidenceOptions, compare_grid
from orchestrator.analysis.findings import (
    axis_findings,
    format_p,
    literature_finding,
    noise_finding,
    p_text,
)
from orchestrator.analysis.noise import noise_floors
from orchestrator.analysis.outcomes import ProblemOutcomes
from orchestrator.analysis.paired import compare_paired

N = 164
R = 2_000
TASKS = tuple(sorted(f"Python/{i}" for i in range(N)))
Z = NormalDist().inv_cdf


def setting(model: str, tuning: str, precision: str, passed: np.ndarray):
    key = hashlib.sha256(f"{model}{precision}".encode()).hexdigest()
    row = {
        "key": key,
        "model_name": model,
        "tuning": tuning,
        "template": "own",
        "decoding": "greedy",
        "max_length": 2048,
        "precision": precision,
        "backend": "hf",
        "benchmark": "humanevalfix",
        "variant": "tests",
        "length_semantics": "total",
        "limit": None,
        "score_pct": 100 * float(passed.mean()),
    }
    return row, key, ProblemOutcomes(TASKS, passed)


def grid(models):
    """{model: (tuning, {precision: passed})} -> (rows, outcomes)."""
    rows, outcomes = [], {}
    for model, (tuning, settings) in models.items():
        for precision, passed in settings.items():
            row, key, outcome = setting(model, tuning, precision, passed)
            rows.append(row)
            outcomes[key] = outcome
    return rows, outcomes


def percentile_ci(d: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The documented bootstrap, by hand: problems drawn with replacement from
    default_rng(seed), the 2.5% and 97.5% quantiles of the resampled means, in points."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, d.size, size=(R, d.size))
    low, high = np.quantile(d[idx].mean(axis=1), [0.025, 0.975])
    return 100 * float(low), 100 * float(high)


def mdd(f: float, m: int) -> float:
    """The detectable difference at 80% power at Holm's first step of a family of m."""
    return 100 * (Z(1 - 0.05 / (2 * m)) + Z(0.8)) * (max(f, 1 / N) / N) ** 0.5


def test_one_model_one_sample_per_problem_mcnemar_holm_and_the_null_sentence():
    base = np.zeros(N, dtype=bool)
    base[:60] = True
    int4 = base.copy()
    int4[:20] = False  # 20 problems lost, none gained: b = 20, c = 0
    rows, outcomes = grid({"m": ("base", {"bf16": base, "int4": int4, "fp16": base.copy()})})
    comparisons = compare_grid(rows, outcomes, DEFAULT_BASELINE, None, EvidenceOptions(R))
    effects = [c for c in comparisons if c.family == "axis effects, all models"]
    assert [(c.value, c.test.b, c.test.c) for c in effects] == [("fp16", 0, 0), ("int4", 20, 0)]
    int4_test = effects[1]
    p = 2 * 0.5**20  # exact McNemar, then Holm over the family of 2: 2p
    assert int4_test.test.p_value == pytest.approx(p, rel=1e-12)
    assert int4_test.p_adjusted == pytest.approx(2 * p, rel=1e-12)
    low, high = percentile_ci(int4.astype(float) - base)
    assert (int4_test.test.ci_low_pp, int4_test.test.ci_high_pp) == pytest.approx((low, high))
    sentences = [f.sentence for f in axis_findings(comparisons, {"humanevalfix": "pass@1"})]
    assert sentences == [
        f"Precision (fp16): no significant effect (largest |delta| 0.0 points; detectable at "
        f"80% power: {mdd(0, 2):.1f} points)",
        f"4-bit quantization (int4 vs bf16) lowers pass@1 by {2000 / 164:.1f} points (95% CI "
        f"{low:.1f} to {high:.1f}; Holm-adjusted p < 0.001; 1 model, 164 problem pairs)",
    ]


def two_models():
    a = np.zeros(N, dtype=bool)
    a[:50] = True
    b = np.zeros(N, dtype=bool)
    b[100:150] = True
    a4, b4 = a.copy(), b.copy()
    a4[:5] = False  # each loses 5 problems of its own
    b4[100:105] = False
    return grid(
        {
            "base-m": ("base", {"bf16": a, "int4": a4}),
            "inst-m": ("instruct", {"bf16": b, "int4": b4}),
        }
    )


def test_two_models_one_vote_each_the_sign_flip_test_and_the_instruct_only_sentence():
    rows, outcomes = two_models()
    comparisons = compare_grid(rows, outcomes, DEFAULT_BASELINE, None, EvidenceOptions(R))
    [both] = [c for c in comparisons if c.family == "axis effects, all models"]
    # the composite difference: -1/2 on each of the 10 problems, 0 elsewhere; every one of the
    # 2^10 sign patterns is enumerated, and only the two with all signs equal are as extreme
    assert both.test.exhaustive and both.test.method.value == "sign-flip permutation"
    assert both.test.p_value == pytest.approx(2 / 2**10)
    assert both.test.delta_pp == pytest.approx(-100 * 5 / 164)
    assert both.n_problem_pairs == 2 * N and both.models == ("base-m", "inst-m")
    [inst] = [c for c in comparisons if c.family == "axis effects, instruct models"]
    assert inst.test.p_value == pytest.approx(2 / 2**5)  # McNemar, b = 5, c = 0
    e = np.zeros(N)
    e[:5] = e[100:105] = -0.5
    low, high = percentile_ci(e)
    sentences = [f.sentence for f in axis_findings(comparisons, {"humanevalfix": "pass@1"})]
    assert sentences == [
        f"4-bit quantization (int4 vs bf16) lowers pass@1 by {500 / 164:.1f} points (95% CI "
        f"{low:.1f} to {high:.1f}; Holm-adjusted p = 0.002; 2 models, 328 problem pairs)",
        f"Instruct models only: 4-bit quantization: no significant effect (largest |delta| "
        f"{500 / 164:.1f} points; detectable at 80% power: {mdd(5 / 164, 1):.1f} points)",
    ]


def test_an_effect_within_the_noise_is_said_not_to_count():
    rows, outcomes = two_models()
    floors = noise_floors(
        [
            {
                "backend": "hf",
                "setting_key": "k",
                "n_problems": 20,
                "n_samples": 20,
                "n_outcome_changed": 1,
                "outcome_change_sum": 1.0,
            }
        ]
    )
    assert floors["hf"].noise_pp == pytest.approx(5.0)
    noise = {b: f.noise_pp for b, f in floors.items()}
    comparisons = compare_grid(rows, outcomes, DEFAULT_BASELINE, noise, EvidenceOptions(R))
    [both] = [c for c in comparisons if c.family == "axis effects, all models"]
    assert both.significant and not both.counts and both.noise_pp == 5.0
    [first, *_] = axis_findings(comparisons, {"humanevalfix": "pass@1"})
    assert first.sentence.startswith(
        f"4-bit quantization (int4 vs bf16) changes pass@1 by {-500 / 164:+.1f} points (95% CI"
    )
    assert first.sentence.endswith("within the re-generation noise of 5.0 points: not counted")
    assert noise_finding(floors).sentence == (
        "Re-generation noise (repeat-check): hf 5.0 points (1 setting, 20 problems checked); a "
        "difference counts only above the noise of its backends."
    )
    assert noise_finding({}).sentence.startswith("No re-generation noise measured")
    assert literature_finding(32, 16, {"strong": 9, "weak": 7}).sentence == (
        "Literature: 16 of 32 published values are reproduced by some setting of its model (the "
        "study's exact-match rule); as evidence for the matching setting: 9 strong, 7 weak "
        "(coincidence rate)."
    )


def test_axis_effects_are_the_study_effects_with_tests_and_the_families_are_declared():
    from orchestrator.analysis.effects import effect_pairs, summarize_effects
    from tests.planted import planted_grid

    g = planted_grid(7, 3, decodings=("greedy", "t0.2", "t0.8"), lengths=(2048, 512))
    comparisons = compare_grid(g.rows, g.outcomes, DEFAULT_BASELINE, None, EvidenceOptions(200))
    # one vote per model: the tested delta is the effects table's mean change
    study = {
        (r.axis, str(r.value), r.group): r.mean_change_pp
        for r in summarize_effects(effect_pairs(g.rows, DEFAULT_BASELINE))
    }
    tested = {
        (c.axis, c.value, c.group): c.test.delta_pp
        for c in comparisons
        if c.kind.value == "axis effects"
    }
    assert tested.keys() == study.keys() and len(tested) == 16
    assert all(tested[k] == pytest.approx(study[k]) for k in study)
    sizes = {(c.family, c.kind.adjustment.value): c.family_size for c in comparisons}
    assert sizes == {
        ("axis effects, all models", "Holm"): 8,
        ("axis effects, instruct models", "Holm"): 8,
        ("model-0 settings vs baseline (backend=hf)", "Westfall-Young max-T"): 59,
        ("model-1 settings vs baseline (backend=hf)", "Westfall-Young max-T"): 59,
        ("model-2 settings vs baseline (backend=hf)", "Westfall-Young max-T"): 59,
        # each axis value at every other combination of the other axes:
        # template 1 x 29, decoding 2 x 19, max_length 1 x 29, precision 4 x 11
        ("exploratory", "Benjamini-Hochberg"): 140,
    }
    assert all(c.p_adjusted >= c.test.p_value - 1e-12 for c in comparisons)


def test_settings_over_other_problems_are_another_scope_and_pilots_stay_out():
    base = np.zeros(N, dtype=bool)
    base[:40] = True
    rows, outcomes = grid({"m": ("base", {"bf16": base, "int4": base.copy()})})
    short = ProblemOutcomes(TASKS[:10], base[:10])
    row, key, _ = setting("m", "base", "fp16", base)
    rows.append(row | {"limit": 10})  # another context: its own scope
    outcomes[key] = short
    comparisons = compare_grid(rows, outcomes, DEFAULT_BASELINE, None, EvidenceOptions(100))
    assert {len(c.scope.task_ids) for c in comparisons} == {N}
    assert all(key not in c.b_keys for c in comparisons)


def test_a_resampled_p_at_its_floor_reads_as_a_bound_and_an_exact_p_as_itself():
    # InfiBench's 67:0 split: per-problem scores (the sign-flip test) that differ on 67
    # problems, all one way: 2^67 sign patterns, so resampled, and no resample is as extreme
    a, b = np.zeros(100), np.zeros(100)
    b[:67] = 0.5
    test = compare_paired(a, b, n_resamples=10_000)
    assert not test.exhaustive and test.p_value == pytest.approx(2 / 10_001)
    assert p_text(test.p_value, test.exhaustive, test.n_resamples) == "p < 0.0002"
    # one sample per problem: the exact McNemar p, which has no floor
    mcnemar = compare_paired(np.zeros(100, bool), b > 0, n_resamples=10_000)
    assert mcnemar.p_value == pytest.approx(2 / 2**67)
    assert p_text(mcnemar.p_value, mcnemar.exhaustive, 10_000) == "p = 1.355e-20"
    # three problems differ: every sign pattern enumerated, an exact p of 2/8
    few = compare_paired(a, np.r_[np.full(3, 0.5), np.zeros(97)], n_resamples=10_000)
    assert few.exhaustive and p_text(few.p_value, few.exhaustive, 10_000) == "p = 0.25"
    # the bound is rounded up, never down: 2/201 = 0.00995 reads "< 0.01"
    assert p_text(2 / 201, False, 200) == "p < 0.01" and p_text(2 / 301, False, 300) == "p < 0.0067"


def test_a_finding_whose_test_is_at_its_floor_says_its_adjusted_p_is_below_it():
    passed = np.ones(N, bool)
    dropped = passed.copy()
    dropped[:67] = False  # both models lose 67 problems at int4: pooled, a sign-flip test
    rows, outcomes = grid(
        {
            "m1": ("base", {"bf16": passed, "int4": dropped}),
            "m2": ("base", {"bf16": passed, "int4": dropped}),
        }
    )
    comparisons = compare_grid(rows, outcomes, DEFAULT_BASELINE, None, EvidenceOptions(200))
    [effect] = [c for c in comparisons if c.family == "axis effects, all models"]
    assert not effect.test.exhaustive and effect.p_adjusted == pytest.approx(2 / 201)
    [finding] = axis_findings(comparisons, {"humanevalfix": "pass@1"})
    assert "Holm-adjusted p < 0.01; 2 models" in finding.sentence
    assert format_p(0.0123) == "= 0.012" and format_p(0.0005, bound=True) == "< 0.001"
