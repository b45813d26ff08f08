"""Synthetic grids with planted effects: per-problem outcomes whose true effects are known.

Each model has, per problem, a solve probability: *easy* problems (1), *hard* ones (0) and
*uncertain* ones (uniform in [0.2, 0.8]). Every setting draws its outcome on an uncertain problem
afresh (the sampling noise a re-generation, another precision or another batch brings), so two
settings of a null axis are exchangeable problem by problem: the null of the paired tests holds
exactly. A planted effect of -k problems turns k of the model's easy problems (its own random
choice, disjoint across effects) into failures in every setting with that axis value; effects
add in settings that carry two of them.

`planted_grid` returns what the report's analysis reads (effect rows and outcomes), in memory;
`write_planted_store` writes one such grid as a store, through Store.write_rows, for the report
end to end.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from orchestrator.analysis.outcomes import ProblemOutcomes
from storage.store import Store
from tests.fixtures_store import Spec, write_setting
from workers.scoring import setting_counts

PRECISIONS = ("bf16", "fp16", "fp32", "int8", "int4")
# the planted effects: the template -8 problems, 4-bit -6, precision and 8-bit 0
PLANTED: dict[tuple[str, Any], int] = {("template", "instruct"): 8, ("precision", "int4"): 6}
NULLS = (("precision", "fp16"), ("precision", "fp32"), ("precision", "int8"))
EASY, UNCERTAIN = 0.30, 0.15  # shares of the problems (the rest are hard)
# E[2 p (1 - p)] for p uniform in [0.2, 0.8]: the chance two draws of an uncertain problem differ
DISAGREE = 2 * (0.5 - (0.2**2 + 0.2 * 0.8 + 0.8**2) / 3)


@dataclass(frozen=True)
class PlantedGrid:
    rows: list[dict[str, Any]]  # the report's effect rows (orchestrator/report/tables/build.py)
    outcomes: dict[str, ProblemOutcomes]
    specs: dict[str, tuple]  # key -> (model, template, decoding, max_length, precision)


def model_names(n_models: int) -> list[tuple[str, str]]:
    """(name, tuning): alternately base and instruct."""
    return [(f"model-{i}", "instruct" if i % 2 else "base") for i in range(n_models)]


def planted_grid(
    seed: int,
    n_models: int = 4,
    n_problems: int = 164,
    planted: dict[tuple[str, Any], int] | None = None,
    decodings: tuple[str, ...] = ("greedy",),
    lengths: tuple[int, ...] = (2048,),
    templates: tuple[str, ...] = ("own", "instruct"),
) -> PlantedGrid:
    planted = PLANTED if planted is None else planted
    rng = np.random.default_rng(seed)
    tasks = tuple(sorted(f"Python/{i}" for i in range(n_problems)))
    rows, outcomes, specs = [], {}, {}
    for model, tuning in model_names(n_models):
        kind = rng.choice(3, size=n_problems, p=[EASY, UNCERTAIN, 1 - EASY - UNCERTAIN])
        p = np.where(kind == 0, 1.0, np.where(kind == 1, rng.uniform(0.2, 0.8, n_problems), 0.0))
        easy = rng.permutation(np.flatnonzero(kind == 0))
        lost, start = {}, 0
        for effect, k in planted.items():
            lost[effect] = easy[start : start + k]
            start += k
        for template in templates:
            for decoding in decodings:
                for length in lengths:
                    for precision in PRECISIONS:
                        axes = {"template": template, "precision": precision}
                        q = p.copy()
                        for (axis, value), problems in lost.items():
                            if axes.get(axis) == value:
                                q[problems] = 0.0
                        passed = rng.random(n_problems) < q
                        spec = (model, template, decoding, length, precision)
                        key = hashlib.sha256(f"{seed}|{spec}".encode()).hexdigest()
                        specs[key] = spec
                        outcomes[key] = ProblemOutcomes(tasks, passed)
                        rows.append(
                            {
                                "key": key,
                                "model_name": model,
                                "tuning": tuning,
                                "template": template,
                                "decoding": decoding,
                                "max_length": length,
                                "precision": precision,
                                "backend": "hf",
                                "benchmark": "humanevalfix",
                                "variant": "tests",
                                "length_semantics": "total",
                                "limit": None,
                                "score_pct": 100 * float(passed.mean()),
                            }
                        )
    return PlantedGrid(rows, outcomes, specs)


def predicted_power(
    k: int, n_models: int, family_size: int, n_problems: int = 164, alpha: float = 0.05
) -> float:
    """The power the axis-effect test predicts for a planted effect of -k problems, at Holm's
    first step (alpha / m, Bonferroni's level: Holm is at least as powerful).

    The sign-flip test of the composite difference e_i (the mean over the M models of d_mi)
    rejects when |sum e_i| > z sqrt(sum e_i^2) (its null's variance). With the models
    independent, E[e^2] = E[d^2] / M + (1 - 1/M) (k / n)^2, where E[d^2] = UNCERTAIN x
    DISAGREE + k / n, and sum e_i is about normal with mean n k / n and variance
    n (E[e^2] - (k / n)^2). The permutation distribution is a lattice: flipping one model's
    +-1 difference moves the sum by 2 / M, and an observed sum must clear the threshold by half
    that step to reach the tail (the continuity correction, 1 / M). So the power is
    Phi((n delta - 1/M - z sqrt(n E[e^2])) / sqrt(n (E[e^2] - delta^2)))."""
    n = n_problems
    delta = k / n
    second = UNCERTAIN * DISAGREE + delta
    e2 = second / n_models + (1 - 1 / n_models) * delta**2
    z = NormalDist().inv_cdf(1 - alpha / (2 * family_size))
    margin = n * delta - 1 / n_models - z * math.sqrt(n * e2)
    return NormalDist().cdf(margin / math.sqrt(n * (e2 - delta**2)))


def write_planted_store(root: str, seed: int, n_models: int = 4) -> PlantedGrid:
    """One planted grid as a store (one sample per problem, passes at the drawn problems)."""
    grid = planted_grid(seed, n_models)
    store = Store(root)
    tuning = {r["key"]: r["tuning"] for r in grid.rows}
    for key, (model, template, decoding, length, precision) in grid.specs.items():
        spec = Spec(model, template, decoding, length, precision, 0)
        written = write_setting(store, spec, tag=key)
        [row] = store.read_shard("settings", written).to_pylist()
        store.write_rows("settings", written, [row | {"model_tuning": tuning[key]}])
        _replace_outcomes(store, written, grid.outcomes[key])
    return grid


def _replace_outcomes(store: Store, key: str, outcomes: ProblemOutcomes) -> None:
    """Rewrite a written setting's executions and score with the planted outcomes."""
    execs = store.read_shard("executions", key).to_pylist()
    passed = outcomes.as_mapping()
    for row in execs:
        ok = bool(passed[row["task_id"]])
        row.update(passed=ok, outcome="passed" if ok else "failed", score=float(ok))
    store.write_rows("executions", key, execs)
    [score] = store.read_shard("scores", key).to_pylist()
    value = outcomes.score
    score.update(value=value, pass_at_1=value, n_passed=int(outcomes.values.sum()))
    # the exact counts a score stores (schema 5) follow the planted outcomes too
    score.update(
        setting_counts([r["task_id"] for r in execs], [r["passed"] for r in execs]).columns()
    )
    store.write_rows("scores", key, [score])
