"""A model's samples as the problems view writes them (orchestrator/report/view/sampletable.py): the
join of generations and executions, its order, states and passed flags, and each problem's
file of rows and texts, against the same rows built one sample at a time."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from orchestrator.report.view.inspection import CellState, cell_state, task_order
from orchestrator.report.view.modelfiles import EXECUTION_COLUMNS, GENERATION_COLUMNS
from orchestrator.report.view.sampletable import SAMPLE_FIELDS, integers, sample_table
from tests.unit.orchestrator.report.view.view_rows import execution, generation, table


def _tables(gens: list[dict], execs: list[dict]) -> tuple[pa.Table, pa.Table]:
    return (
        table("generations", GENERATION_COLUMNS, gens),
        table("executions", EXECUTION_COLUMNS, execs),
    )


def test_samples_join_in_problem_then_grid_then_sample_order_with_states_and_passed_flags():
    gens = [
        generation("b", "Python/1", 1),
        generation("b", "Python/1", 0, hit=True),
        generation("a", "Python/2", 0, truncated=True),
        generation("a", "Python/1", 0),
        generation("a", "Python/10", 0),  # generated, not executed
    ]
    execs = [
        execution("b", "Python/1", 1, "passed"),
        execution("b", "Python/1", 0, "failed"),
        execution("a", "Python/1", 0, "passed"),
        execution("a", "Python/2", 0, "error"),
        execution("c", "Python/1", 0, "failed"),  # an execution without its generation
    ]
    got = sample_table(*_tables(gens, execs), keys=["b", "a"])  # grid order: b, then a
    assert got.tasks == ("Python/1", "Python/2", "Python/10")  # dataset order, not text order
    assert got.starts == [0, 3, 4, 5]
    seen = list(zip(got.column, got.sample_index, got.state, strict=True))
    assert seen == [
        (0, 0, CellState.LENGTH_LIMIT),  # b, Python/1: failed at the length limit
        (0, 1, CellState.PASSED),
        (1, 0, CellState.PASSED),  # a, Python/1
        (1, 0, CellState.TRUNCATED),  # a, Python/2
        (1, 0, CellState.NOT_EXECUTED),  # a, Python/10
    ]
    assert got.code == ["L", "P", "P", "R", "N"]
    assert got.outcome == ["failed", "passed", "passed", "error", None]
    assert got.error_type == ["AssertionError", None, None, "AssertionError", None]
    assert got.passes == [False, True, True, False, False]  # each sample's own execution
    assert got.passing() == {
        ("b", "Python/1"): 1,
        ("a", "Python/1"): 1,
        ("a", "Python/2"): 0,
        ("a", "Python/10"): 0,
    }
    assert got.states() == {
        ("b", "Python/1"): ["L", "P"],
        ("a", "Python/1"): ["P"],
        ("a", "Python/2"): ["R"],
        ("a", "Python/10"): ["N"],
    }


def test_a_sample_executed_twice_takes_its_last_execution_row():
    gens = [generation("a", "Python/0", 0)]
    execs = [execution("a", "Python/0", 0, "failed"), execution("a", "Python/0", 0, "passed")]
    got = sample_table(*_tables(gens, execs), keys=["a"])
    assert got.state == [CellState.PASSED] and got.outcome == ["passed"]
    assert got.passes == [True] and got.passing() == {("a", "Python/0"): 1}


def test_a_generation_outside_the_groups_settings_is_named():
    gens = [generation("a", "Python/0", 0), generation("z", "Python/0", 0)]
    with pytest.raises(ValueError, match="outside the group: \\['z'\\]"):
        sample_table(*_tables(gens, []), keys=["a"])


def test_no_rows_make_no_problems():
    got = sample_table(*_tables([], []), keys=["a"])
    assert got.tasks == () and got.starts == [0] and got.passes == [] and got.passing() == {}


def test_a_problem_file_names_its_fields_once_and_stores_each_text_once():
    gens = [
        {**generation(key, "Python/0", 0), "program": f"def f():\n    return {key!r}\n"}
        for key in ("a", "b", "c")
    ]
    gens[2]["continuation"] = gens[2]["program"]  # a continuation equal to a program
    execs = [execution("a", "Python/0", 0, "passed"), execution("b", "Python/0", 0, "failed")]
    execs[1]["error_message"] = "assert 1 == 2"
    got = sample_table(*_tables(gens, execs), keys=["c", "b", "a"])
    shown = got.problem_file(0)
    assert shown["task_id"] == "Python/0" and shown["fields"] == list(SAMPLE_FIELDS)
    assert len(shown["texts"]) == len(set(shown["texts"]))
    rows = [dict(zip(SAMPLE_FIELDS, row, strict=True)) for row in shown["samples"]]
    assert [r["setting"] for r in rows] == [0, 1, 2]  # columns of the matrix: c, b, a
    text = shown["texts"]
    assert {text[r["prompt"]] for r in rows} == {"prompt Python/0"}  # one prompt, stored once
    assert text[rows[0]["continuation"]] == text[rows[0]["program"]] == gens[2]["program"]
    assert rows[0]["state"] == "not_executed" and rows[0]["error_type"] is None
    assert rows[1]["state"] == "failed" and text[rows[1]["error_message"]] == "assert 1 == 2"
    assert rows[2]["error_message"] is None and text[rows[2]["program"]] == gens[0]["program"]


def test_a_problem_file_flags_each_sample_the_harness_slicing_cut():
    gens = [
        generation("a", "Python/0", 0, mismatch=True),
        generation("a", "Python/0", 1),
        {**generation("b", "Python/0", 0), "decode_mismatch": None},  # not set: not flagged
    ]
    shown = sample_table(*_tables(gens, []), keys=["a", "b"]).problem_file(0)
    rows = [dict(zip(SAMPLE_FIELDS, row, strict=True)) for row in shown["samples"]]
    assert [(r["setting"], r["i"], r["decode_mismatch"]) for r in rows] == [
        (0, 0, True),
        (0, 1, False),
        (1, 0, False),
    ]


def test_an_absent_text_shows_as_empty_and_is_the_empty_text():
    gens = [
        {**generation("a", "Python/0", 0), "prompt": None},
        {**generation("b", "Python/0", 0), "prompt": ""},
    ]
    shown = sample_table(*_tables(gens, []), keys=["a", "b"]).problem_file(0)
    rows = [dict(zip(SAMPLE_FIELDS, row, strict=True)) for row in shown["samples"]]
    assert rows[0]["prompt"] == rows[1]["prompt"] == rows[0]["program"]
    assert shown["texts"][rows[0]["prompt"]] == "" and shown["texts"].count("") == 1


def _one_at_a_time(gens: list[dict], execs: list[dict], keys: list[str]) -> dict:
    """What each problem file shows, sample by sample with dicts (the view's former way)."""
    last = {(e["setting_key"], e["task_id"], e["sample_index"]): e for e in execs}
    out: dict[str, list[tuple]] = {}
    for g in gens:
        e = last.get((g["setting_key"], g["task_id"], g["sample_index"]))
        outcome = e["outcome"] if e else None
        state = cell_state(outcome, g["prompt_truncated"], g["hit_length_limit"])
        shown = (
            keys.index(g["setting_key"]),
            g["sample_index"],
            state.value,
            outcome,
            g["prompt"] or "",
            g["continuation"] or "",
            g["program"] or "",
            e["error_type"] if e else None,
            e.get("error_message") if e else None,
            g.get("n_prompt_tokens"),
            g.get("n_output_tokens"),
            bool(g["decode_mismatch"]),
        )
        out.setdefault(g["task_id"], []).append(shown)
    return {task: sorted(rows, key=lambda r: r[:2]) for task, rows in out.items()}


def test_the_problem_files_are_those_built_one_sample_at_a_time():
    rng = random.Random(7)
    keys = [f"k{n}" for n in range(6)]
    outcomes = ["passed", "failed", "error", "timeout"]
    gens, execs = [], []
    for key in keys:
        for task in range(12):
            for i in range(rng.choice([1, 1, 3])):
                gen = generation(key, f"Python/{task}", i, truncated=rng.random() < 0.1)
                gen.update(
                    hit_length_limit=rng.random() < 0.2,
                    decode_mismatch=rng.choice([True, False, None]),
                    program=rng.choice([None, f"p{task}", f"q{task}{i}"]),
                    n_prompt_tokens=rng.randrange(50, 90),
                    n_output_tokens=rng.choice([None, 10, 20]),
                )
                gens.append(gen)
                if rng.random() < 0.9:
                    exe = execution(key, f"Python/{task}", i, rng.choice(outcomes))
                    exe["error_message"] = rng.choice([None, "boom", f"line {task}"])
                    execs.append(exe)
    rng.shuffle(gens)
    rng.shuffle(execs)
    got = sample_table(*_tables(gens, execs), keys=keys)
    want = _one_at_a_time(gens, execs, keys)
    assert list(got.tasks) == sorted(want, key=task_order)
    for p, task in enumerate(got.tasks):
        shown = got.problem_file(p)
        text = shown["texts"]
        rows = []
        for row in shown["samples"]:
            r = list(row)
            for at in (4, 5, 6, 8):  # prompt, continuation, program, error message
                r[at] = None if r[at] is None else text[r[at]]
            rows.append(tuple(r))
        assert rows == want[task], task
        assert len(text) == len(set(text))
    last = {(e["setting_key"], e["task_id"], e["sample_index"]): e for e in execs}
    passing: dict[tuple[str, str], int] = {}
    for g in gens:
        e = last.get((g["setting_key"], g["task_id"], g["sample_index"]))
        cell = (g["setting_key"], g["task_id"])
        passing[cell] = passing.get(cell, 0) + bool(e is not None and e["passed"])
    assert got.passing() == passing


def test_integers_reads_every_chunk_and_slice_and_refuses_nulls():
    column = pa.chunked_array([pa.array([1, 2, 3], pa.int32()), pa.array([4, 5], pa.int32())])
    assert integers(column).tolist() == [1, 2, 3, 4, 5]
    assert integers(pa.array(range(10), pa.int64()).slice(3, 4)).tolist() == [3, 4, 5, 6]
    with pytest.raises(ValueError, match="1 nulls"):
        integers(pa.array([1, None], pa.int32()))


def test_a_truncated_prompt_that_passed_shows_r_and_counts_as_a_pass():
    """Its state is R (the truncation explains the sample), its execution passed: `compare`
    counts it, so the matrix's paired counts must too."""
    gens = [generation("a", "Python/0", 0, truncated=True), generation("b", "Python/0", 0)]
    execs = [execution("a", "Python/0", 0, "passed"), execution("b", "Python/0", 0, "passed")]
    got = sample_table(*_tables(gens, execs), keys=["a", "b"])
    assert got.code == ["R", "P"] and got.passes == [True, True]
    assert got.passing() == {("a", "Python/0"): 1, ("b", "Python/0"): 1}
