"""orchestrator/analysis/evidence.py: which cells of a model a one-axis effect compares."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from orchestrator.analysis.baseline import AXES, DEFAULT_BASELINE
from orchestrator.analysis.effects import Cell
from orchestrator.analysis.evidence import _one_axis_pairs

DOMAINS = {
    "template": ("own", "instruct"),
    "decoding": ("greedy", "t0.2", "t0.8"),
    "max_length": (512, 2048),
    "precision": ("bf16", "fp16", "4bit"),
    "backend": ("hf", "vllm"),  # not pinned by the default baseline: a free axis
}


def every_two(cells, pinned):
    """The definition: every (reference, cell) of the model differing in exactly one axis, a
    pinned one, on which the reference holds the baseline's value; by reference, then cell."""
    for ref in cells:
        for cell in cells:
            changed = [a for a in AXES if cell.value(a) != ref.value(a)]
            if (
                len(changed) == 1
                and changed[0] in pinned
                and ref.value(changed[0]) == pinned[changed[0]]
            ):
                yield changed[0], ref, cell


def cell(values, n: int) -> Cell:
    return Cell("m", "instruct", tuple(values), (), Fraction(n % 100), (f"{n:064x}",))


def test_a_full_grid_compares_each_baseline_value_with_every_other_value_of_its_axis():
    cells = [cell(v, n) for n, v in enumerate(itertools.product(*(DOMAINS[a] for a in AXES)))]
    found = list(_one_axis_pairs(cells, DEFAULT_BASELINE))
    # 72 cells; per pinned axis, the cells on its baseline value x the axis's other values
    assert len(found) == 36 * 1 + 24 * 2 + 36 * 1 + 24 * 2
    assert found == list(every_two(cells, DEFAULT_BASELINE))


@pytest.mark.parametrize("seed", range(20))
def test_one_axis_pairs_are_every_two_cells_that_differ_on_one_pinned_axis(seed):
    rng = random.Random(seed)
    # repeats: some cells are equal on every axis
    cells = [cell((rng.choice(DOMAINS[a]) for a in AXES), n) for n in range(rng.randrange(2, 40))]
    pinned = dict(DEFAULT_BASELINE)
    if seed % 3 == 0:
        pinned["backend"] = "hf"
    found = list(_one_axis_pairs(cells, pinned))
    assert found == list(every_two(cells, pinned))
