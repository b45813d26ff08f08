"""One model's samples for the problems view, as columns: its generations joined with their
executions, in problem (dataset order), setting (grid order) and sample order, and each
problem's file of texts (orchestrator/report/view/modelfiles.py writes them).

A 100-model store holds a million samples, so they are never built row by row (a named tuple
and a dict per sample): the join and the order are NumPy sorts over integer codes, texts are
told apart once per model by Arrow's dictionary encoding, and a problem's rows are zipped from
column slices. No Arrow array is read through `to_numpy`: pyarrow imports pandas for it, which
`view` imports nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from orchestrator.report.view.inspection import STATE_CODE, CellState, cell_state, task_order
from storage.rows import positions

# What a problem file holds of each sample, in this order (a row per sample: the field names
# once per file, not once per sample; the page turns rows back into objects). `setting` is the
# setting's column in the model's matrix, and the texts are positions in the file's `texts`.
SAMPLE_FIELDS = (
    "setting",
    "i",
    "state",
    "outcome",
    "prompt",
    "continuation",
    "program",
    "error_type",
    "error_message",
    "n_prompt_tokens",
    "n_output_tokens",
    "decode_mismatch",  # the harness's prompt slicing cut it in the wrong place (mismatch.py)
)
_TEXTS = ("prompt", "continuation", "program")  # generations' texts, told apart by Arrow
_INTEGERS = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64}


def integers(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An integer column without nulls as NumPy, read from its buffers (`to_numpy` would
    import pandas)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = []
    for chunk in chunks:
        if chunk.null_count:
            raise ValueError(f"an integer column with {chunk.null_count} nulls")
        dtype = _INTEGERS[chunk.type]
        data = np.frombuffer(chunk.buffers()[1], dtype=dtype)
        parts.append(data[chunk.offset : chunk.offset + len(chunk)])
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


@dataclass(frozen=True)
class SampleTable:
    """A group's samples as columns (lists, one value per sample), in problem, then setting
    column, then sample order; `starts[p]:starts[p + 1]` are the rows of `tasks[p]`."""

    keys: tuple[str, ...]  # the settings, in the matrix's (grid) order
    tasks: tuple[str, ...]  # the problems with a generation, in dataset order
    starts: list[int]
    column: list[int]  # the sample's setting, as its position in `keys`
    sample_index: list[int]
    state: list[CellState]
    code: list[str]  # the state's letter (STATE_CODE)
    outcome: list[str | None]
    texts: list[str]  # the generations' distinct texts (prompt, continuation, program)
    text_ids: np.ndarray  # samples x 3: positions in `texts`
    error_type: list[str | None]
    error_message: list[str | None]
    n_prompt_tokens: list[int | None]
    n_output_tokens: list[int | None]
    decode_mismatch: list[bool]
    passes: list[bool]  # its execution passed (the last row of the sample; False: none)

    def states(self) -> dict[tuple[str, str], list[str]]:
        """(setting key, task) -> its samples' state codes in sample order (`matrix`)."""
        out: dict[tuple[str, str], list[str]] = {}
        for p, task in enumerate(self.tasks):
            a, b = self.starts[p], self.starts[p + 1]
            for column, code in zip(self.column[a:b], self.code[a:b], strict=True):
                out.setdefault((self.keys[column], task), []).append(code)
        return out

    def passing(self) -> dict[tuple[str, str], int]:
        """(setting key, task) -> how many of its samples passed, the count `compare` pairs
        (a sample whose prompt was truncated may pass: its state says R, not P)."""
        out: dict[tuple[str, str], int] = {}
        for p, task in enumerate(self.tasks):
            a, b = self.starts[p], self.starts[p + 1]
            for column, ok in zip(self.column[a:b], self.passes[a:b], strict=True):
                cell = (self.keys[column], task)
                out[cell] = out.get(cell, 0) + ok
        return out

    def problem_file(self, p: int) -> dict[str, Any]:
        """Problem `tasks[p]`'s file: each text once (a template's prompt is shared by many
        settings), then a row of SAMPLE_FIELDS per sample."""
        a, b = self.starts[p], self.starts[p + 1]
        ids = self.text_ids[a:b]
        at: dict[int, int] = {}  # the group's text -> the file's, in order of first use
        local = [at.setdefault(i, len(at)) for i in ids.ravel().tolist()]
        texts = [self.texts[i] for i in at]
        prompt, continuation, program = local[0::3], local[1::3], local[2::3]
        messages: list[int | None] = [None] * (b - a)
        if any(m is not None for m in self.error_message[a:b]):
            where = {text: n for n, text in enumerate(texts)}  # a message may equal a text
            for k, message in enumerate(self.error_message[a:b]):
                if message is not None:
                    if message not in where:
                        where[message] = len(texts)
                        texts.append(message)
                    messages[k] = where[message]
        rows = zip(
            self.column[a:b],
            self.sample_index[a:b],
            [s.value for s in self.state[a:b]],
            self.outcome[a:b],
            prompt,
            continuation,
            program,
            self.error_type[a:b],
            messages,
            self.n_prompt_tokens[a:b],
            self.n_output_tokens[a:b],
            self.decode_mismatch[a:b],
            strict=True,
        )
        return {
            "task_id": self.tasks[p],
            "texts": texts,
            "fields": list(SAMPLE_FIELDS),
            "samples": [list(r) for r in rows],
        }


def _coded(column: pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """A column as positions into its distinct values (Arrow's hashing, not a dict per row)."""
    encoded = column.combine_chunks().dictionary_encode(null_encoding="encode")
    return integers(encoded.indices), encoded.dictionary.to_pylist()


def _flags(column: pa.ChunkedArray) -> np.ndarray:
    """A bool column as 0/1 (null as 0), unpacked from its bitmaps (a cast or fill_null with a
    Python value converts the value through pyarrow's pandas check, which imports pandas)."""
    parts = []
    for chunk in column.chunks:
        validity, data = chunk.buffers()[:2]
        span = slice(chunk.offset, chunk.offset + len(chunk))
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")[span]
        if validity is not None and chunk.null_count:
            bits &= np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[span]
        parts.append(bits)
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def _taken(column: pa.ChunkedArray, rows: np.ndarray) -> list[Any]:
    """The column's values at `rows`, None where a row is -1."""
    if not len(column):
        return [None] * rows.size
    values = column.take(positions(np.maximum(rows, 0))).to_pylist()
    for r in np.flatnonzero(rows < 0).tolist():
        values[r] = None
    return values


@dataclass(frozen=True)
class _Codes:
    """Both tables' settings and problems as integers on one numbering (the group's settings
    in grid order, then the executions' others; the generated problems in dataset order, then
    the executions' others), and their sample indices."""

    tasks: list[str]  # the problems with a generation, in dataset order
    n_tasks: int  # how many problems either table names
    g_key: np.ndarray
    g_task: np.ndarray
    g_index: np.ndarray
    e_key: np.ndarray
    e_task: np.ndarray
    e_index: np.ndarray


def _renumbered(codes: np.ndarray, values: list[Any], number: dict[Any, int]) -> np.ndarray:
    """Positions into a column's distinct `values` as the numbers `number` gives the values."""
    return np.array([number[v] for v in values], np.int64)[codes] if values else codes


def _codes(generations: pa.Table, executions: pa.Table, keys: Sequence[str]) -> _Codes:
    """The tables' codes (`_Codes`); a generation of a setting outside `keys` is an error."""
    g_keys, g_key_values = _coded(generations.column("setting_key"))
    g_tasks, g_task_values = _coded(generations.column("task_id"))
    e_keys, e_key_values = _coded(executions.column("setting_key"))
    e_tasks, e_task_values = _coded(executions.column("task_id"))
    column_of = {k: j for j, k in enumerate(keys)}
    unknown = set(g_key_values) - column_of.keys()
    if unknown:
        raise ValueError(f"generations of settings outside the group: {sorted(unknown)[:3]}")
    tasks = sorted(set(g_task_values), key=task_order)
    every_task = tasks + sorted(set(e_task_values) - set(tasks), key=task_order)
    every_key = list(keys) + sorted(set(e_key_values) - column_of.keys())
    task_of = {t: n for n, t in enumerate(every_task)}
    key_of = {k: n for n, k in enumerate(every_key)}
    return _Codes(
        tasks=tasks,
        n_tasks=len(every_task),
        g_key=_renumbered(g_keys, g_key_values, key_of),
        g_task=_renumbered(g_tasks, g_task_values, task_of),
        g_index=integers(generations["sample_index"]),
        e_key=_renumbered(e_keys, e_key_values, key_of),
        e_task=_renumbered(e_tasks, e_task_values, task_of),
        e_index=integers(executions["sample_index"]),
    )


def _last_execution(codes: _Codes) -> np.ndarray:
    """Each generation row's execution row of the same setting, problem and sample (the last
    when it has several), -1 where it has none."""
    width = int(max(codes.g_index.max(initial=0), codes.e_index.max(initial=0))) + 1
    g_code = (codes.g_key * codes.n_tasks + codes.g_task) * width + codes.g_index
    e_code = (codes.e_key * codes.n_tasks + codes.e_task) * width + codes.e_index
    by_code = np.argsort(e_code, kind="stable")  # rows of one sample keep their read order
    sorted_codes = e_code[by_code]
    at = np.maximum(np.searchsorted(sorted_codes, g_code, side="right") - 1, 0)
    if e_code.size:
        return np.where(sorted_codes[at] == g_code, by_code[at], -1)
    return np.full(g_code.size, -1)


def _states(
    generations: pa.Table, executions: pa.Table, executed: np.ndarray, order: np.ndarray
) -> tuple[list[CellState], list[str], list[str | None]]:
    """Each sample's state, its letter and its outcome (None: not executed), from its outcome
    (or none), truncated prompt and length limit flags; `executed` is in the table's order."""
    outcomes, outcome_values = _coded(executions.column("outcome").cast(pa.string()))
    outcome = np.where(executed >= 0, outcomes[np.maximum(executed, 0)] if outcomes.size else 0, -1)
    choices = [None, *outcome_values]
    table = [[[cell_state(o, bool(t), bool(h)) for h in (0, 1)] for t in (0, 1)] for o in choices]
    truncated = _flags(generations.column("prompt_truncated"))[order]
    hit = _flags(generations.column("hit_length_limit"))[order]
    state_no = ((outcome + 1) * 2 + truncated) * 2 + hit
    flat = [state for by_t in table for by_h in by_t for state in by_h]
    numbers = state_no.tolist()
    letters = [STATE_CODE[s] for s in flat]
    return (
        [flat[n] for n in numbers],
        [letters[n] for n in numbers],
        [choices[n + 1] for n in outcome.tolist()],
    )


def _text_ids(generations: pa.Table, order: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The generations' distinct texts and, per sample in the table's order, the positions of
    its prompt, continuation and program among them."""
    texts = pa.concat_arrays(
        [generations.column(c).combine_chunks().cast(pa.string()) for c in _TEXTS]
    )
    encoded = texts.dictionary_encode(null_encoding="encode")
    ids = integers(encoded.indices).reshape(len(_TEXTS), generations.num_rows).T[order]
    distinct = encoded.dictionary.to_pylist()
    if None in distinct:  # an absent text shows as "", one text with a stored ""
        absent = distinct.index(None)
        if "" in distinct:
            ids[ids == absent] = distinct.index("")
        distinct[absent] = ""
    return distinct, ids


def _passes(executions: pa.Table, executed: np.ndarray) -> list[bool]:
    """Each sample's execution passed (its last row, as its state; none: not passed)."""
    flags = _flags(executions.column("passed"))
    passes = (flags[np.maximum(executed, 0)] > 0) & (executed >= 0) if flags.size else executed < -1
    return passes.tolist()


def sample_table(generations: pa.Table, executions: pa.Table, keys: Sequence[str]) -> SampleTable:
    """The group's samples: `generations` (GENERATION_COLUMNS) joined with `executions`
    (EXECUTION_COLUMNS) on setting, problem and sample, the last execution row of a sample
    when it has several; `keys`, the group's settings in grid order (a generation of another
    setting is an error)."""
    codes = _codes(generations, executions, keys)
    order = np.lexsort((codes.g_index, codes.g_key, codes.g_task))  # problem, setting, sample
    executed = _last_execution(codes)[order]
    state, code, outcome = _states(generations, executions, executed, order)
    texts, ids = _text_ids(generations, order)
    return SampleTable(
        keys=tuple(keys),
        tasks=tuple(codes.tasks),
        starts=np.searchsorted(codes.g_task[order], np.arange(len(codes.tasks) + 1)).tolist(),
        column=codes.g_key[order].tolist(),
        sample_index=codes.g_index[order].tolist(),
        state=state,
        code=code,
        outcome=outcome,
        texts=texts,
        text_ids=ids,
        error_type=_taken(executions.column("error_type"), executed),
        error_message=_taken(executions.column("error_message"), executed),
        n_prompt_tokens=generations.column("n_prompt_tokens").take(positions(order)).to_pylist(),
        n_output_tokens=generations.column("n_output_tokens").take(positions(order)).to_pylist(),
        decode_mismatch=_flags(generations.column("decode_mismatch"))[order].astype(bool).tolist(),
        passes=_passes(executions, executed),
    )
