"""The problems view: a static folder a browser opens from disk (`index.html`), written by
`reprogrid view` and by `reprogrid report` (into `<report>/problems/`, which the report's setting
keys link to).

    index.html, problems.js, problems.css     the page (orchestrator/report/view/assets/)
    data/index.js                             the models, and which model holds each setting
    data/<group>/matrix.js                    one model's settings x problems of sample states
    data/<group>/pairs.js                     the paired comparison of every two of its settings
    data/<group>/p/<i>.js                     problems i, i + 1, ... (`problem_files`): their
                                              prompts, continuations, programs and errors under
                                              every setting

A group is a model on one benchmark (`m0`, `m1`, ...). Data files are scripts calling
`reprogridView.receive(id, payload)`: a page opened from file:// may load scripts from its folder
but not fetch() files, and nothing is requested from anywhere else. Opening the page loads the
first five files only (FIRST_PAGE); texts load per problem file, the pairs per model, on demand.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from orchestrator.report.tables.labels import SHOWN_AXES, ordered_settings
from orchestrator.report.view.problems import PairOptions, matrix, pairs
from orchestrator.report.view.sampletable import sample_table
from orchestrator.report.view.viewpool import ViewCancelled, ViewPool, worker_gate
from storage.damage import StoreDamage
from storage.integrity import setting_key_of
from storage.layout import TableView
from storage.rows import positions
from storage.store import Store

logger = logging.getLogger(__name__)

BATCH_SETTINGS = 600  # settings whose execution rows are read at once (~100,000 rows at n = 1)
# A problem file holds consecutive problems up to about this many characters of JSON: a file
# per problem made 16,400 files at 100 models, each creation 0.03-0.7 ms of system time on
# this machine's disk (0.5-11 s a view, varying run to run), and slower still on a cluster's
# network filesystem; a click loads at most this much.
PROBLEM_FILE_BYTES = 256_000

VIEW_DIR = "problems"  # the view's folder inside a report's output folder
ASSETS = {
    "problems.html": "index.html",
    "problems.js": "problems.js",
    "problems.css": "problems.css",
}
GENERATION_COLUMNS = tuple(
    """setting_key task_id sample_index prompt continuation program n_prompt_tokens
    n_output_tokens prompt_truncated hit_length_limit decode_mismatch""".split()
)
# what groups_of, matrix and the setting axes read of a settings row
SETTING_COLUMNS = ("setting_key", "status", "model_name", *SHOWN_AXES, "template_kind")
EXECUTION_COLUMNS = (
    "setting_key",
    "task_id",
    "sample_index",
    "outcome",
    "passed",
    "error_type",
    "error_message",
)


@dataclass(frozen=True)
class Group:
    id: str  # m0, m1, ... (a folder name)
    model: str
    benchmark: str
    label: str
    settings: tuple[dict[str, Any], ...]  # settings rows with generations


@dataclass(frozen=True)
class ViewSummary:
    out: str
    groups: tuple[str, ...]  # group labels
    keys: frozenset[str]  # the settings it shows
    n_settings: int
    n_problem_files: int
    first_page: tuple[str, ...]  # what opening the page loads, relative to `out`
    first_page_bytes: int


def first_page(groups: Sequence[Group]) -> tuple[str, ...]:
    """The files a browser loads when it opens index.html (without a #setting= link): the page,
    its script and style, the index, and the first group's matrix."""
    first = (f"data/{groups[0].id}/matrix.js",) if groups else ()
    return ("index.html", "problems.js", "problems.css", "data/index.js", *first)


def groups_of(settings: Sequence[Mapping[str, Any]], generated: set[str]) -> list[Group]:
    """The settings with generations, by model and benchmark (sorted); a model's label names
    its benchmark only when it has several."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in settings:
        if row["setting_key"] in generated:
            by.setdefault((str(row["model_name"]), str(row["benchmark"])), []).append(dict(row))
    models = [m for m, _ in by]
    out = []
    for n, (model, benchmark) in enumerate(sorted(by)):
        label = model if models.count(model) == 1 else f"{model} · {benchmark}"
        out.append(Group(f"m{n}", model, benchmark, label, tuple(by[(model, benchmark)])))
    return out


def groups_without_damaged(groups: Sequence[Group], damage: StoreDamage | None) -> list[Group]:
    """The problems view's groups without the settings left out; a group left with none is
    dropped."""
    skipped = damage.settings if damage is not None else frozenset()
    if not skipped:
        return list(groups)
    out = []
    for group in groups:
        kept = tuple(s for s in group.settings if s["setting_key"] not in skipped)
        if kept:
            out.append(dataclasses.replace(group, settings=kept))
    return out


def view_groups(store: Store) -> list[Group]:
    """The groups the view of `store` shows (`groups_of` its settings with generations), with
    the settings columns the view reads (a settings row holds ~60: at 20,000 settings all of
    them took 330 MB, and the groups travel to the view's worker processes)."""
    settings = store.read_table("settings", columns=SETTING_COLUMNS).to_pylist()
    return groups_of(settings, {setting_key_of(k) for k in store.shards("generations")})


def groups_at(uri: str) -> list[Group]:
    """`view_groups` of the store at `uri` (in a view worker: `report` has its first worker
    read them while its own process imports and checks, rather than have both workers wait)."""
    return view_groups(Store(uri))


def _json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _script(id_: str, payload: Any) -> str:
    return _text_script(id_, _json(payload))


def _text_script(id_: str, text: str) -> str:
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


def _write(root: Path, relative: str, id_: str, payload: Any) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_script(id_, payload), encoding="utf-8")


def _keys(groups: Sequence[Group]) -> list[str]:
    return [str(s["setting_key"]) for g in groups for s in g.settings]


def batches(groups: Sequence[Group], size: int = BATCH_SETTINGS) -> list[list[Group]]:
    """Consecutive groups, about `size` settings a batch (a group is never split)."""
    out: list[list[Group]] = []
    for group in groups:
        if not out or sum(len(g.settings) for g in out[-1]) + len(group.settings) > size:
            out.append([])
        out[-1].append(group)
    return out


def read_executions(store: Store, batch: Sequence[Group]) -> pa.Table:
    """A batch's execution rows, read once: a pack holds the rows of many groups, and its row
    groups decode once per batch rather than once per group."""
    return store.read_table("executions", _keys(batch), columns=EXECUTION_COLUMNS)


def generations_of(store: Store, batch: Sequence[Group]) -> TableView:
    """The generations table's loose shards of a batch, listed once for its groups' reads: a
    model's read listed a folder of a shard per setting for its own 60 (at 6,000 settings a
    batch's ten reads took 0.44 s listing per model, 0.38-0.41 s listing once)."""
    return store.view("generations", keys=_keys(batch))


def split_executions(executions: pa.Table, batch: Sequence[Group]) -> list[pa.Table]:
    """Each group's rows of its batch's `executions`, in the order they were read: one stable
    sort by group (a filter of the batch's rows per group took 0.3 s of a 5 s batch at 6,000
    settings). A row of no group of the batch is in none. No Arrow array is built from Python
    values nor read as NumPy: pyarrow imports pandas for either (0.27 s and 40 MB in each
    worker, which imports it nowhere else)."""
    owner = {str(s["setting_key"]): n for n, g in enumerate(batch) for s in g.settings}
    keys = executions["setting_key"].to_pylist()
    group = np.fromiter((owner.get(k, len(batch)) for k in keys), np.int64, len(keys))
    rows = executions.take(positions(np.argsort(group, kind="stable")))  # keeps their order
    counts = np.bincount(group, minlength=len(batch) + 1)
    starts = np.concatenate([[0], np.cumsum(counts)])
    return [rows.slice(int(starts[n]), int(counts[n])) for n in range(len(batch))]


def group_files(
    store: Store,
    group: Group,
    options: PairOptions,
    executions: pa.Table,
    generations: TableView | None = None,
) -> list[tuple[str, str]]:
    """One group's matrix, pairs and problem files, as (path under the view's folder, text).
    `executions`: the group's execution rows (`split_executions`); `generations`: the table
    listed for its batch (`generations_of`), else listed for this group."""
    rows = store.read_table("generations", _keys([group]), GENERATION_COLUMNS, generations)
    keys = [str(row["setting_key"]) for row in ordered_settings(group.settings)]
    samples = sample_table(rows, executions, keys)
    problems = [_json(samples.problem_file(p)) for p in range(len(samples.tasks))]
    starts = problem_files([len(text) for text in problems], PROBLEM_FILE_BYTES)
    grid = matrix(group.settings, samples.states())
    grid.update(id=group.id, model=group.model, benchmark=group.benchmark, label=group.label)
    grid["problem_files"] = starts
    folder = f"data/{group.id}"
    files = [
        (f"{folder}/matrix.js", _script(f"{group.id}/matrix", grid)),
        (f"{folder}/pairs.js", _script(f"{group.id}/pairs", pairs(keys, samples.passed, options))),
    ]
    for first, end in zip(starts, [*starts[1:], len(problems)], strict=True):
        text = f'{{"first":{first},"problems":[{",".join(problems[first:end])}]}}'
        files.append((f"{folder}/p/{first}.js", _text_script(f"{group.id}/p/{first}", text)))
    return files


def _assets(root: Path) -> None:
    folder = resources.files("orchestrator.report.view") / "assets"
    for name, target in ASSETS.items():
        (root / target).write_text(folder.joinpath(name).read_text(encoding="utf-8"), "utf-8")


def write_batch(
    store: Store | str,
    root: Path,
    batch: Sequence[Group],
    options: PairOptions,
) -> int:
    """Write a batch of groups (`batches`); returns the number of problem files. `store`: the
    store, or its URI (in a worker process). In a worker given a gate (`start_worker`), the
    batch is computed, then written once the gate opens."""
    store = Store(store) if isinstance(store, str) else store
    gate = worker_gate()
    executions = split_executions(read_executions(store, batch), batch)
    generations = generations_of(store, batch)
    files = []
    for group, rows in zip(batch, executions, strict=True):
        if gate is not None:
            gate.check()  # a report whose options failed its check stops within a group
        files += group_files(store, group, options, rows, generations)
    if gate is not None:
        gate.wait()
    for relative, text in files:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return sum("/p/" in relative for relative, _ in files)


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise ViewCancelled("the problems view was stopped before it was written")


def _done(batch: Sequence[Group]) -> None:
    for group in batch:
        logger.info("problems view: %s (%d settings)", group.label, len(group.settings))


def _prepare(root: Path) -> None:
    if (root / "data" / "index.js").is_file():  # an older view of ours: no stale model left
        shutil.rmtree(root / "data")
    root.mkdir(parents=True, exist_ok=True)


def _wait_ready(ready: threading.Event | None, cancel: threading.Event | None) -> None:
    while ready is not None and not ready.wait(0.1):
        _check(cancel)
    _check(cancel)


def write_view(
    store: Store,
    out: str | Path,
    options: PairOptions | None = None,
    report_link: str | None = None,
    generated_at: str | None = None,
    workers: int = 1,
    batch_settings: int = BATCH_SETTINGS,
    groups: Sequence[Group] | None = None,
    cancel: threading.Event | None = None,
    ready: threading.Event | None = None,
    pool: ViewPool | None = None,
) -> ViewSummary:
    """Write the problems view of every generated setting of `store` into `out` (created).
    `report_link`: the report page relative to `out`, shown in the header (None: no link).
    `workers` > 1: batches of `batch_settings` settings are written by that many processes,
    which open the store by its URI (ValueError for a store given a filesystem its URI does
    not name); the files are the same. `groups`: `view_groups(store)`, when the caller has them.
    `cancel`, once set: ViewCancelled between batches (a report stopped while its view is
    written in the background); the batches being written finish, no other begins.
    `ready`: nothing is written (nor `out` created) before it is set; the workers compute
    their first batches meanwhile (`Gate`). A `cancel` set before it writes nothing. With
    `ready`, the workers run behind this process (niceness BEHIND_PARENT): a report's own work
    is one thread, which then keeps a core while the workers share the other, and they take
    every cycle it leaves. `pool`: the workers, started by the caller (`ViewPool`), who ends
    them; `workers` is then its number."""
    options = options or PairOptions()
    root = Path(out)
    groups = list(view_groups(store) if groups is None else groups)
    files = 0
    todo = batches(groups, batch_settings)
    workers = pool.workers if pool is not None else min(workers, len(todo))
    if workers > 1 and type(Store(store.uri).fs) is not type(store.fs):
        raise ValueError(
            f"the view's {workers} worker processes open the store by its URI {store.uri!r}, "
            f"which names another filesystem than the store's own: write it with workers=1"
        )
    if workers > 1:  # each batch in a process of its own, reading the store by its URI
        with contextlib.ExitStack() as owned:
            if pool is None:
                pool = owned.enter_context(ViewPool(workers, behind=ready is not None))
            gate, executor = pool.gate, pool.executor
            try:
                # One batch per worker in flight, the next submitted as one finishes: a
                # worker's Ctrl-C fails its batch only, and a queued batch would still be written.
                waiting = list(reversed(todo))
                running: dict[Future[int], list[Group]] = {}
                while waiting and len(running) < workers:
                    batch = waiting.pop()
                    running[executor.submit(write_batch, store.uri, root, batch, options)] = batch
                _wait_ready(ready, cancel)
                _prepare(root)
                gate.go.set()
                while waiting or running:
                    _check(cancel)
                    while waiting and len(running) < workers:
                        batch = waiting.pop()
                        job = executor.submit(write_batch, store.uri, root, batch, options)
                        running[job] = batch
                    finished, _ = wait(running, timeout=0.2, return_when=FIRST_COMPLETED)
                    for job in finished:
                        files += job.result()  # a worker's failure (or Ctrl-C) raises here
                        _done(running.pop(job))
            finally:  # a batch still waiting on the gate ends rather than hold up the pool
                gate.stop.set()
    else:
        _wait_ready(ready, cancel)
        _prepare(root)
        for batch in todo:
            _check(cancel)
            files += write_batch(store, root, batch, options)
            _done(batch)
    keys = {str(s["setting_key"]): g.id for g in groups for s in g.settings}
    index = {
        "store": store.uri,
        "generated_at": generated_at or datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "report": report_link,
        "groups": [
            {"id": g.id, "label": g.label, "model": g.model, "n_settings": len(g.settings)}
            for g in groups
        ],
        "keys": keys,
    }
    _write(root, "data/index.js", "index", index)
    _assets(root)
    page = first_page(groups)
    size = sum((root / f).stat().st_size for f in page)
    return ViewSummary(
        str(root),
        tuple(g.label for g in groups),
        frozenset(keys),
        len(keys),
        files,
        page,
        size,
    )
