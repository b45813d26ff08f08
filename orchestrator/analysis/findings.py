"""The findings: one sentence per axis in the study's style, each generated from its test. Pure.

From the axis-effects families of `orchestrator.analysis.evidence` (all models, and instruct
models only), per scope:

* an axis value whose effect **counts** (Holm-adjusted p < 0.05 and |delta| above the measured
  re-generation noise, where measured) gets its sentence: "4-bit quantization (int4 vs bf16)
  lowers pass@1 by 3.1 points (95% CI -4.9 to -1.3; Holm-adjusted p = 0.002; 11 models, 1,804
  problem pairs)";
* one that is significant but within the noise: "... changes pass@1 by -0.8 points (...), within
  the re-generation noise of 1.2 points: not counted";
* the values of an axis without such an effect share one sentence: "precision (fp16, fp32): no
  significant effect (largest |delta| 0.9 points; detectable at 80% power: 2.4 points)", where
  the detectable difference is that of the largest change's test at the family's first Holm
  step (alpha / family size), the level it would have had to pass.

Quantization is its own axis in these sentences, as in the study: int8 and int4 are "8-bit" and
"4-bit quantization", the other precision values "precision".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from orchestrator.analysis.evidence import ALL, Comparison, scope_label
from orchestrator.analysis.multiplicity import FamilyKind
from orchestrator.analysis.noise import NoiseFloor
from orchestrator.analysis.paired import DEFAULT_ALPHA, DEFAULT_POWER

NOUNS = {
    "template": "prompt template",
    "decoding": "sampling strategy",
    "max_length": "maximum generation length",
    "precision": "precision",
    "int8": "8-bit quantization",
    "int4": "4-bit quantization",
    "backend": "backend",
}
QUANTIZED = ("int8", "int4")


@dataclass(frozen=True)
class Finding:
    scope: str
    group: str  # "all", "instruct"; "" for the store-wide sentences (noise, literature)
    topic: str  # an axis group (template, decoding, max_length, precision, int8, int4,
    # backend), or "noise", "literature", "untested" (why no axis has a sentence)
    values: str  # the axis values the sentence is about, space-separated
    sentence: str
    counts: bool  # an effect that counts
    delta_pp: float | None = None
    ci_low_pp: float | None = None
    ci_high_pp: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    adjustment: str = ""
    family: str = ""
    family_size: int | None = None
    n_models: int | None = None
    n_problem_pairs: int | None = None
    mdd_pp: float | None = None  # for "no significant effect": at the family's first Holm step
    noise_pp: float | None = None


def topic_of(axis: str, value: str) -> str:
    if axis == "precision" and value in QUANTIZED:
        return value
    return axis


def p_floor(n_resamples: int) -> float:
    """The smallest two-sided p a resampled sign-flip test gives: each one-sided tail counts
    the observed sum as one of n_resamples + 1 (analysis/paired.py's +1 correction), so a test
    no resample matched reads 2 / (n_resamples + 1), however small its exact p."""
    return min(1.0, 2 / (n_resamples + 1))


def at_floor(p: float, exhaustive: bool, n_resamples: int) -> bool:
    """Whether a p is a resampled one at its floor, where it says only that the p is below it
    (an exact McNemar or an exhaustive sign-flip p has no floor)."""
    return not exhaustive and p <= p_floor(n_resamples) * (1 + 1e-9)


def _round_up(x: float, digits: int = 2) -> str:
    """`x` rounded up to `digits` significant digits, so that a bound stays a bound."""
    step = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    return f"{math.ceil(round(x / step, 9)) * step:.{digits}g}"


def p_text(p: float, exhaustive: bool, n_resamples: int) -> str:
    """ "p = 0.0123" (4 significant digits), or "p < 0.0002" for a resampled p at its floor:
    the floor, rounded up, as the bound it is (a 67:0 split's exact p is about 1e-20)."""
    if at_floor(p, exhaustive, n_resamples):
        return f"p < {_round_up(p)}"
    return f"p = {p:.4g}"


def format_p(p: float, bound: bool = False) -> str:
    """An adjusted p in a sentence: "= 0.012", "< 0.001"; `bound`: the p is an upper bound (its
    test's resampled p is at its floor), "< 0.0024"."""
    if p < 0.001:
        return "< 0.001"
    return f"< {_round_up(p)}" if bound else f"= {p:.3f}"


def _subject(c: Comparison) -> str:
    if c.axis == "template":
        return f"the {c.value} template (vs {c.baseline_value})"
    if c.axis == "max_length":
        return f"a maximum length of {c.value} (vs {c.baseline_value})"
    if c.axis == "decoding":
        return f"decoding {c.value} (vs {c.baseline_value})"
    if c.axis == "precision" and c.value in QUANTIZED:
        return f"{NOUNS[c.value]} ({c.value} vs {c.baseline_value})"
    return f"{c.axis} {c.value} (vs {c.baseline_value})"


def _evidence(c: Comparison) -> str:
    t = c.test
    models = f"{c.n_models} model{'s' if c.n_models != 1 else ''}"
    return (
        f"{t.confidence:.0%} CI {t.ci_low_pp:.1f} to {t.ci_high_pp:.1f}; "
        f"{c.kind.adjustment.value}-adjusted p "
        f"{format_p(c.p_adjusted, at_floor(t.p_value, t.exhaustive, t.n_resamples))}; "
        f"{models}, {c.n_problem_pairs:,} problem pairs"
    )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def effect_sentence(c: Comparison, metric: str) -> str:
    """The sentence of one significant axis effect (counted, or within the noise)."""
    if c.counts:
        verb = "lowers" if c.test.delta_pp < 0 else "raises"
        return _capital(
            f"{_subject(c)} {verb} {metric} by {abs(c.test.delta_pp):.1f} points ({_evidence(c)})"
        )
    return _capital(
        f"{_subject(c)} changes {metric} by {c.test.delta_pp:+.1f} points ({_evidence(c)}), "
        f"within the re-generation noise of {c.noise_pp:.1f} points: not counted"
    )


def family_mdd_pp(
    c: Comparison, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER
) -> float:
    """The comparison's minimum detectable difference at the family's first Holm step."""
    z = NormalDist().inv_cdf
    per_test = z(1 - alpha / 2) + z(power)
    family = z(1 - alpha / (2 * c.family_size)) + z(power)
    return c.test.mdd_pp * family / per_test


def null_sentence(topic: str, members: Sequence[Comparison]) -> str:
    largest = max(members, key=lambda c: abs(c.test.delta_pp))
    values = ", ".join(c.value for c in members)
    noun = NOUNS.get(topic, topic)
    head = noun if topic in QUANTIZED else f"{noun} ({values})"
    return _capital(
        f"{head}: no significant effect (largest |delta| {abs(largest.test.delta_pp):.1f} "
        f"points; detectable at 80% power: {family_mdd_pp(largest):.1f} points)"
    )


def _row(c: Comparison, sentence: str, topic: str, values: str, mdd: float, prefix: str) -> Finding:
    t = c.test
    return Finding(
        scope=scope_label(c.scope),
        group=c.group,
        topic=topic,
        values=values,
        sentence=prefix + sentence[:1].lower() + sentence[1:] if prefix else sentence,
        counts=c.counts,
        delta_pp=t.delta_pp,
        ci_low_pp=t.ci_low_pp,
        ci_high_pp=t.ci_high_pp,
        p_value=t.p_value,
        p_adjusted=c.p_adjusted,
        adjustment=c.kind.adjustment.value,
        family=c.family,
        family_size=c.family_size,
        n_models=c.n_models,
        n_problem_pairs=c.n_problem_pairs,
        mdd_pp=mdd,
        noise_pp=c.noise_pp,
    )


def axis_findings(comparisons: Sequence[Comparison], metric: Mapping[str, str]) -> list[Finding]:
    """The sentences of every axis-effects family, in the families' order (all models first)."""
    effects = [c for c in comparisons if c.kind is FamilyKind.AXIS_EFFECTS]
    scopes = list(dict.fromkeys(scope_label(c.scope) for c in effects))
    groups: dict[tuple[str, str, str], list[Comparison]] = {}
    for c in effects:
        groups.setdefault((scope_label(c.scope), c.group, topic_of(c.axis, c.value)), []).append(c)
    out = []
    for (scope, group, topic), members in groups.items():
        prefix = f"On {scope}: " if len(scopes) > 1 else ""
        if group != ALL:
            prefix += f"{_capital(group)} models only: "
        name = metric.get(members[0].scope.benchmark, "the score")
        for c in (m for m in members if m.significant):
            sentence = effect_sentence(c, name)
            out.append(_row(c, sentence, topic, c.value, c.test.mdd_pp, prefix))
        rest = [m for m in members if not m.significant]
        if rest:
            largest = max(rest, key=lambda c: abs(c.test.delta_pp))
            values = " ".join(m.value for m in rest)
            row = _row(
                largest, null_sentence(topic, rest), topic, values, family_mdd_pp(largest), prefix
            )
            out.append(row)
    return out


def noise_finding(floors: Mapping[str, NoiseFloor]) -> Finding:
    if not floors:
        sentence = (
            "No re-generation noise measured (run `reprogrid repeat-check` on a few settings): "
            "differences are judged by their adjusted p alone."
        )
        return Finding("", "", "noise", "", sentence, False)
    parts = [
        f"{f.backend} {f.noise_pp:.1f} points ({f.n_settings} setting"
        f"{'s' if f.n_settings != 1 else ''}, {f.n_problems} problems checked)"
        for f in floors.values()
    ]
    sentence = (
        f"Re-generation noise (repeat-check): {'; '.join(parts)}; a difference counts only "
        "above the noise of its backends."
    )
    worst = max(f.noise_pp for f in floors.values())
    return Finding("", "", "noise", " ".join(floors), sentence, False, noise_pp=worst)


def untested_finding(n_scored: int, pilots: Sequence[str], baseline: str) -> Finding:
    """Why no axis has a sentence: the store holds no scored setting, or only pilots (`pilots`:
    each scored pilot's subset, "20 of 164"), which take no part in the tests, or no model has
    a pair of settings at the baseline (`baseline`: "template=own decoding=greedy ...")."""
    if not n_scored:
        sentence = "No axis tested: the store holds no complete setting with a score."
    elif len(pilots) == n_scored:
        subsets = ", ".join(sorted(set(pilots)))
        which = (
            "the one scored setting is a pilot"
            if n_scored == 1
            else f"all {n_scored} scored settings are pilots"
        )
        sentence = (
            f"No axis tested: {which} (a subset of the problems: {subsets}), and pilots take "
            "no part in the tests. Run the full set (the same grid without benchmark.limit and "
            "benchmark.problems) to test each axis."
        )
    else:
        sentence = (
            f"No axis tested: no model has a baseline setting ({baseline}) and a setting that "
            "changes one axis of it over the same problems; choose another baseline with "
            "--baseline KEY=VALUE"
        )
        if pilots:
            sentence += f" ({len(pilots)} pilot setting(s) take no part in the tests)"
        sentence += "."
    return Finding("", "", "untested", "", sentence, False)


def literature_finding(n_values: int, n_reproduced: int, strength: Mapping[str, int]) -> Finding:
    """ "Literature: 16 of 32 published values are reproduced by some setting ..."."""
    bands = ", ".join(
        f"{strength[s]} {s}" for s in ("strong", "moderate", "weak") if strength.get(s)
    )
    sentence = (
        f"Literature: {n_reproduced} of {n_values} published value"
        f"{'s are' if n_values != 1 else ' is'} reproduced by some setting of its model "
        "(the study's exact-match rule)"
    )
    if n_reproduced and bands:
        sentence += f"; as evidence for the matching setting: {bands} (coincidence rate)"
    return Finding("", "", "literature", "", sentence + ".", False)
