"""One model's folder of the problems view, `data/<name>/` (the name: identity.py):

    matrix.js      its settings x problems of sample states (problems.py `matrix`)
    p/<i>.js       problems i, i + 1, ... (`problem_files`): their prompts, continuations,
                   programs and errors under every setting (sampletable.py)

Each file is a script calling `reprogridView.receive(id, payload)`, the id being the file's
path under data/ without `.js`: it names the model by its folder, never by its place among the
store's models, so a model added to the store leaves every other folder as it is.

A folder is written whole under a temporary name beside it, then renamed: a build that is
killed leaves no folder under a model's name, and the next view builds that model again.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from orchestrator.report.tables.labels import ordered_settings
from orchestrator.report.view.plan import MATRIX, Group, ViewPlan
from orchestrator.report.view.problems import matrix
from orchestrator.report.view.sampletable import sample_table
from storage.rows import positions
from storage.store import Store

BATCH_SETTINGS = 600  # settings whose execution rows are read at once (~100,000 rows at n = 1)
# A problem file holds consecutive problems up to about this many characters of JSON: a file
# per problem made 16,400 files at 100 models (file creation is slow on a network
# filesystem); a click loads at most this much.
PROBLEM_FILE_BYTES = 256_000
BUILDING = ".building-"  # a model folder being written (renamed to its name when whole)

GENERATION_COLUMNS = tuple(
    """setting_key task_id sample_index prompt continuation program n_prompt_tokens
    n_output_tokens prompt_truncated hit_length_limit decode_mismatch""".split()
)
EXECUTION_COLUMNS = (
    "setting_key",
    "task_id",
    "sample_index",
    "outcome",
    "passed",
    "error_type",
    "error_message",
)


def as_json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def script(id_: str, payload: Any) -> str:
    """A data file calling the page with `payload`."""
    return text_script(id_, as_json(payload))


def text_script(id_: str, text: str) -> str:
    """A data file calling the page with `text`, a payload already in JSON."""
    return f"reprogridView.receive({json.dumps(id_)},{text});\n"


def problem_files(sizes: Sequence[int], budget: int = PROBLEM_FILE_BYTES) -> list[int]:
    """The first problem of each problem file: consecutive problems (of these JSON sizes) fill a
    file until it holds `budget` characters, and a file holds one problem at least."""
    starts: list[int] = []
    held = budget
    for p, size in enumerate(sizes):
        if held >= budget:
            starts.append(p)
            held = 0
        held += size
    return starts


def setting_keys(groups: Sequence[Group]) -> list[str]:
    return [str(s["setting_key"]) for g in groups for s in g.settings]


def batches(groups: Sequence[Group], size: int = BATCH_SETTINGS) -> list[list[Group]]:
    """Consecutive groups, about `size` settings a batch (a group is never split)."""
    out: list[list[Group]] = []
    for group in groups:
        if not out or sum(len(g.settings) for g in out[-1]) + len(group.settings) > size:
            out.append([])
        out[-1].append(group)
    return out


def split_executions(executions: pa.Table, batch: Sequence[Group]) -> list[pa.Table]:
    """Each group's rows of its batch's `executions`, in the order they were read: one stable
    sort by group, rather than a filter of the batch's rows per group. A row of no group of
    the batch is in none. No Arrow array is built from Python values nor read as NumPy: pyarrow
    imports pandas for either, which `view` imports nowhere else."""
    owner = {str(s["setting_key"]): n for n, g in enumerate(batch) for s in g.settings}
    keys = executions["setting_key"].to_pylist()
    group = np.fromiter((owner.get(k, len(batch)) for k in keys), np.int64, len(keys))
    rows = executions.take(positions(np.argsort(group, kind="stable")))  # keeps their order
    counts = np.bincount(group, minlength=len(batch) + 1)
    starts = np.concatenate([[0], np.cumsum(counts)])
    return [rows.slice(int(starts[n]), int(counts[n])) for n in range(len(batch))]


def model_files(
    store: Store, plan: ViewPlan, group: Group, executions: pa.Table
) -> list[tuple[str, str]]:
    """One group's matrix and problem files, as (path under its folder, text). `executions`:
    the group's execution rows (`split_executions`); its generations are read from the
    listing the plan named it by."""
    keys = [str(row["setting_key"]) for row in ordered_settings(group.settings)]
    rows = store.read_table("generations", keys, GENERATION_COLUMNS, plan.generations)
    samples = sample_table(rows, executions, keys)
    problems = [as_json(samples.problem_file(p)) for p in range(len(samples.tasks))]
    starts = problem_files([len(text) for text in problems], PROBLEM_FILE_BYTES)
    grid = matrix(group.settings, samples.states(), samples.passing())
    grid.update(id=group.id, model=group.model, benchmark=group.benchmark, label=group.label)
    grid["problem_files"] = starts
    files = []
    for first, end in zip(starts, [*starts[1:], len(problems)], strict=True):
        text = f'{{"first":{first},"problems":[{",".join(problems[first:end])}]}}'
        files.append((f"p/{first}.js", text_script(f"{group.id}/p/{first}", text)))
    # the matrix last: a folder holding it was written whole (`plan.is_built`)
    files.append((MATRIX, script(f"{group.id}/matrix", grid)))
    return files


def write_model(data: Path, group: Group, files: Sequence[tuple[str, str]]) -> None:
    """Write a model's folder under a temporary name in `data`, then rename it to its own."""
    building = data / f"{BUILDING}{group.id}-{uuid.uuid4().hex[:8]}"
    for relative, text in files:
        path = building / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    try:
        os.rename(building, data / group.id)
    except OSError:  # another view wrote the same model meanwhile: the same files
        if not (data / group.id / MATRIX).is_file():
            raise
        shutil.rmtree(building)


def build_models(store: Store, plan: ViewPlan, data: Path) -> list[Group]:
    """Write the folder of every model the plan lacks, a batch of models at a time: a batch's
    execution rows are read at once (a pack holds the rows of many models, and its row
    groups decode once per batch rather than once per model). Returns the models written."""
    done = []
    for batch in batches(plan.missing):
        read = store.read_table(
            "executions", setting_keys(batch), EXECUTION_COLUMNS, plan.executions
        )
        for group, rows in zip(batch, split_executions(read, batch), strict=True):
            write_model(data, group, model_files(store, plan, group, rows))
            done.append(group)
    return done
