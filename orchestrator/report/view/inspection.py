"""One problem of one setting, read from the store: what `reprogrid show` prints and what the
problems view (orchestrator/report/view/folder.py) shows in a cell.

A sample's *cell state* folds its generation flags and its execution outcome into one closed
set (CellState), in the order a reader needs it: a truncated prompt explains everything after
it; a pass is a pass; a failure of a sample that hit the length limit is most likely the limit
(the program was cut off), so it says so rather than the exception it raised.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import pyarrow.compute as pc

from storage.integrity import setting_key_of
from storage.store import Store


class CellState(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # the program could not run (syntax error, killed by a limit)
    TIMEOUT = "timeout"
    TRUNCATED = "truncated_prompt"  # the prompt did not fit the length limit
    LENGTH_LIMIT = "length_limit"  # not passed, and the output hit the length limit
    TOOLCHAIN = "toolchain_missing"  # InfiBench: no executor for the unit test here
    NOT_EXECUTED = "not_executed"  # generated, no execution stored (yet)


# One letter per state: the matrix prints it in each cell, so a state never rests on colour.
STATE_CODE: dict[CellState, str] = {
    CellState.PASSED: "P",
    CellState.FAILED: "F",
    CellState.ERROR: "E",
    CellState.TIMEOUT: "T",
    CellState.TRUNCATED: "R",
    CellState.LENGTH_LIMIT: "L",
    CellState.TOOLCHAIN: "X",
    CellState.NOT_EXECUTED: "N",
}
_BY_OUTCOME = {
    "passed": CellState.PASSED,
    "failed": CellState.FAILED,
    "error": CellState.ERROR,
    "timeout": CellState.TIMEOUT,
    "toolchain_missing": CellState.TOOLCHAIN,
}


class UnknownSetting(ValueError):
    """No setting (or more than one) of the store matches a key prefix."""


class UnknownProblem(ValueError):
    """The setting holds no sample of that problem (or not that sample)."""


def cell_state(outcome: str | None, prompt_truncated: bool, hit_length_limit: bool) -> CellState:
    """The state of one sample (see the module docstring for the order)."""
    if prompt_truncated:
        return CellState.TRUNCATED
    if outcome is None:
        return CellState.NOT_EXECUTED
    try:
        state = _BY_OUTCOME[outcome]
    except KeyError:
        valid = ", ".join(_BY_OUTCOME)
        raise ValueError(f"unknown execution outcome {outcome!r}; outcomes: {valid}") from None
    if state is not CellState.PASSED and hit_length_limit:
        return CellState.LENGTH_LIMIT
    return state


def task_order(task_id: str) -> tuple:
    """Dataset order of task ids like "Python/12" (numeric suffix), else by text."""
    match = re.search(r"(\d+)$", task_id)
    return (task_id[: match.start()], int(match.group(1))) if match else (task_id, -1)


@dataclass(frozen=True)
class Sample:
    """One sample of one problem under one setting, as stored."""

    setting_key: str
    task_id: str
    sample_index: int
    prompt: str
    continuation: str  # the raw text after the prompt
    program: str  # the post-processed program, as executed
    state: CellState
    outcome: str | None  # the executions table's outcome; None when not executed
    error_type: str | None
    error_message: str | None
    prompt_truncated: bool
    hit_length_limit: bool
    n_prompt_tokens: int | None
    n_output_tokens: int | None
    # the harness's prompt slicing cut the continuation in the wrong place (report/mismatch.py)
    decode_mismatch: bool

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "state": self.state.value}


# ---------------------------------------------------------------------------------------------
# Reads


def resolve_setting(store: Store, prefix: str) -> str:
    """The full key of the one setting of the store whose key starts with `prefix` (reports
    show 12 characters)."""
    keys = sorted({setting_key_of(k) for k in store.shards("settings")})
    found = [k for k in keys if k.startswith(prefix)]
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(k[:16] for k in found[:10])
        raise UnknownSetting(f"setting key prefix {prefix!r} is ambiguous: {shown}")
    near = difflib.get_close_matches(prefix, [k[: len(prefix)] for k in keys], n=3)
    hint = f" Did you mean: {', '.join(near)}?" if near else ""
    shown = ", ".join(k[:12] for k in keys[:10]) + (" ..." if len(keys) > 10 else "")
    raise UnknownSetting(
        f"no setting of store {store.uri} has a key starting {prefix!r}.{hint} "
        f"Settings: {shown or '(none)'}"
    )


def setting_row(store: Store, key: str) -> dict[str, Any]:
    """The settings row of `key` (resolved: it exists)."""
    shard = store.read_shard("settings", key)
    if shard is None or shard.num_rows == 0:
        raise UnknownSetting(f"setting {key[:12]} has no readable settings row in {store.uri}")
    return shard.to_pylist()[0]


def _rows(store: Store, table: str, key: str, task_id: str) -> list[dict[str, Any]]:
    data = store.read_table(table, [key])
    return data.filter(pc.equal(data["task_id"], task_id)).to_pylist()


def _problems_of(store: Store, key: str) -> list[str]:
    data = store.read_table("generations", [key]).select(["task_id"])
    return sorted(set(data["task_id"].to_pylist()), key=task_order)


def samples_from_rows(
    generations: Sequence[Mapping[str, Any]], executions: Sequence[Mapping[str, Any]]
) -> list[Sample]:
    """Join generation and execution rows on (setting, task, sample), in sample order."""
    executed = {(r["setting_key"], r["task_id"], r["sample_index"]): r for r in executions}
    out = []
    for g in sorted(generations, key=lambda r: (r["setting_key"], r["sample_index"])):
        e = executed.get((g["setting_key"], g["task_id"], g["sample_index"]), {})
        outcome = e.get("outcome")
        truncated, hit = bool(g["prompt_truncated"]), bool(g["hit_length_limit"])
        out.append(
            Sample(
                setting_key=g["setting_key"],
                task_id=g["task_id"],
                sample_index=int(g["sample_index"]),
                prompt=g["prompt"] or "",
                continuation=g["continuation"] or "",
                program=g["program"] or "",
                state=cell_state(outcome, truncated, hit),
                outcome=outcome,
                error_type=e.get("error_type"),
                error_message=e.get("error_message"),
                prompt_truncated=truncated,
                hit_length_limit=hit,
                n_prompt_tokens=g.get("n_prompt_tokens"),
                n_output_tokens=g.get("n_output_tokens"),
                decode_mismatch=bool(g.get("decode_mismatch")),
            )
        )
    return out


def problem_samples(store: Store, key: str, task_id: str) -> list[Sample]:
    """Every stored sample of `task_id` under setting `key`, in sample order."""
    gens = _rows(store, "generations", key, task_id)
    if not gens:
        problems = _problems_of(store, key)
        if not problems:
            raise UnknownProblem(f"setting {key[:12]} has no generations in {store.uri}")
        near = difflib.get_close_matches(task_id, problems, n=3)
        hint = f" Did you mean: {', '.join(near)}?" if near else ""
        raise UnknownProblem(
            f"setting {key[:12]} has no sample of problem {task_id!r}.{hint} Problems: "
            f"{problems[0]} ... {problems[-1]} ({len(problems)})"
        )
    return samples_from_rows(gens, _rows(store, "executions", key, task_id))


def pick_sample(samples: Sequence[Sample], index: int) -> Sample:
    for sample in samples:
        if sample.sample_index == index:
            return sample
    valid = ", ".join(str(s.sample_index) for s in samples)
    first = samples[0]
    raise UnknownProblem(
        f"setting {first.setting_key[:12]} has no sample {index} of {first.task_id}; "
        f"samples: {valid}"
    )


def program_diff(a: Sample, b: Sample) -> str:
    """A unified diff of two samples' programs, labelled with their settings."""
    lines = difflib.unified_diff(
        a.program.splitlines(keepends=True),
        b.program.splitlines(keepends=True),
        fromfile=f"{a.setting_key[:12]} {a.task_id} sample {a.sample_index}",
        tofile=f"{b.setting_key[:12]} {b.task_id} sample {b.sample_index}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
