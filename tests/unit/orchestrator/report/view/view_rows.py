"""Generations and executions rows as the problems view reads them (tests of view.py and
sampletable.py)."""

from __future__ import annotations

import pyarrow as pa

from storage.schema import TABLES


def table(name: str, columns: tuple[str, ...], rows: list[dict]) -> pa.Table:
    schema = pa.schema([TABLES[name].field(c) for c in columns])
    return pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows], schema=schema)


def generation(key: str, task: str, i: int, **flags: bool) -> dict:
    return {
        "setting_key": key,
        "task_id": task,
        "sample_index": i,
        "prompt": f"prompt {task}",
        "continuation": f"cont {key} {task} {i}",
        "program": None,
        "prompt_truncated": flags.get("truncated", False),
        "hit_length_limit": flags.get("hit", False),
        "decode_mismatch": flags.get("mismatch", False),
    }


def execution(key: str, task: str, i: int, outcome: str) -> dict:
    return {
        "setting_key": key,
        "task_id": task,
        "sample_index": i,
        "outcome": outcome,
        "passed": outcome == "passed",
        "error_type": None if outcome == "passed" else "AssertionError",
    }
