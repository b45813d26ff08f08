"""A store that answers in a second at the scale of a leaderboard study (docs/store.md,
"Compaction"): stores of N models x the paper's 60 settings (164 problems, one sample; the rows
of the test fixture's `write_setting`, under the keys the paper60 grid of those models really
has, so that `plan` finds every setting done), compacted as the end of a run leaves them. Then,
each in a fresh process and side by side: `status`, `plan` of the whole grid, `report` (md,csv,json;
then with html, which writes the problems view in a process per core), `verify`, and
`pandas.read_parquet` of `scores`, with their peak memory; and
DuckDB over the same files as the reference (counting the execution rows, reading `scores`).

    python perf/store_scale.py                         # 660 and 6,000 settings (make bench-store)
    python perf/store_scale.py --sizes 660,6000,20000  # the 20,000 takes a few minutes to build
    python perf/store_scale.py --loose                 # every shard through Store.write_rows as
                                                       # a run writes it, then `compact` (timed)

By default a store is built by the fast path: the generations through `Store.write_rows` (they
are never packed), the other tables straight into packs of 1,000 (what `compact` would cut), then
`compact` for the runs row and the manifest's record of the generations. Timings vary with the
machine's load; read the ratios of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# This checkout's packages first (Python puts the script's folder, perf/, on the path, not the
# repository root): the script measures the code it sits in, whichever checkout is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage.compact import PackPolicy
from storage.store import Store

# The measured commands run this file as their process: what builds stores (Hydra, the grid,
# the fixture's rows) is imported where it is used, so that it adds nothing to their start.

REPO = Path(__file__).resolve().parents[1]
SETTINGS_PER_MODEL = 60
POLICY = PackPolicy()


def grid_overrides(store: Path) -> list[str]:
    return ["grid=paper60", "model=deepseekcoder-1.3b-base", "backend=hf", f"store={store}"]


def prepared_grid(store: Path, n_models: int) -> Any:
    """The paper60 grid of `n_models` synthetic models (copies of one model config, each its own
    repo id): 60 settings each (a PreparedGrid)."""
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.prepare.prepared import prepare

    config = load_run_config(grid_overrides(store))
    base = config.models[0]
    models = tuple(
        dataclasses.replace(base, name=f"model-{m:03d}", repo_id=f"org/model-{m:03d}")
        for m in range(n_models)
    )
    return prepare(dataclasses.replace(config, models=models))


class Capture:
    """Stands in for a Store: keeps the rows `write_setting` would write."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {}

    def write_rows(self, table: str, key: str, rows: list[dict[str, Any]]) -> None:
        self.rows[table] = rows


def setting_rows(cell: Any, identity: Any) -> dict[str, list[dict[str, Any]]]:
    """The fixture's rows of one grid cell, under the cell's key and execution identity."""
    from tests import fixtures_store as fx
    from workers.spec import precision_label

    s = cell.setting
    model = s.engine.model
    fx.GRID_BASE.setdefault(model.name, 20 + (int(model.name[-3:]) * 7) % 60)
    template = "own" if s.template == model.own_template else "instruct"
    precision = precision_label(s.engine.dtype, s.engine.quant)
    passes = fx.grid_passes(model.name, template, s.decoding.name, s.max_length, precision)
    spec = fx.Spec(model.name, template, s.decoding.name, s.max_length, precision, passes)
    capture = Capture()
    fx.write_setting(capture, spec)  # type: ignore[arg-type]
    for rows in capture.rows.values():
        for row in rows:
            row["setting_key"] = cell.key
    capture.rows["settings"][0].update(
        execution_key=identity.key, execution_json=identity.fields_json
    )
    return capture.rows


def build(root: Path, n_models: int, loose: bool) -> dict[str, float]:
    """Write the store; seconds to write and to compact."""
    from storage.compact import compact
    from tests import fixtures_store as fx

    prepared = prepared_grid(root, n_models)
    identities = prepared.execution_identities()
    # model by model, as `compact` cuts packs (storage.compact.cut); one benchmark here
    cells = sorted(prepared.cells, key=lambda c: (c.setting.engine.model.name, c.key))
    store = Store(str(root))
    started = time.perf_counter()
    with store.writer_lock():
        for at in range(0, len(cells), POLICY.max_members):
            batch = [
                (c, setting_rows(c, identities[c.key])) for c in cells[at : at + POLICY.max_members]
            ]
            for cell, rows in batch:
                store.write_rows("generations", cell.key, rows["generations"])
                if loose:
                    for table in ("settings", "executions", "scores"):
                        store.write_rows(table, cell.key, rows[table])
            if not loose:
                for table in ("settings", "executions", "scores"):
                    _pack(store, table, [(c.key, rows[table]) for c, rows in batch])
        fx._write_run(store, [c.key for c in cells])  # noqa: SLF001 - the fixture's run row
        written = time.perf_counter() - started
        started = time.perf_counter()
        compact(store, POLICY)
    return {"write_s": written, "compact_s": time.perf_counter() - started}


def _pack(store: Store, table: str, members: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """One pack of `members` ((key, rows)), as `compact` would write it (keys sorted)."""
    import pyarrow as pa

    from storage.packing import pack_files
    from storage.schema import TABLES

    members = sorted(members, key=lambda member: member[0])
    data = pa.Table.from_pylist([r for _, rows in members for r in rows], schema=TABLES[table])
    parts, at = [], 0
    for key, rows in members:
        parts.append((key, data.slice(at, len(rows))))
        at += len(rows)
    pack_files(store, table, [parts], [], POLICY.group_rows(table))


# -- measuring: each command in a fresh process, which reports its own work and peak ----------


def peak_mb(pid: int | str = "self") -> float:
    """A process's peak resident memory (VmHWM: of its own image, whatever its parent had when
    it forked); NaN once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class ChildPeaks:
    """The peak memory (VmHWM) of each process this one started, read from /proc every
    `every_s` while they run: the problems view's workers. getrusage's RUSAGE_CHILDREN does not
    measure them: Linux carries the image a child had between fork and exec (a copy of its
    parent's, 400-500 MB for `report`) into its ru_maxrss."""

    def __init__(self, every_s: float = 0.2) -> None:
        self.peaks: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(every_s,), daemon=True)
        self._thread.start()

    @staticmethod
    def _children() -> list[int]:
        me, found = os.getpid(), []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    # /proc/<pid>/stat: "pid (command) state ppid ...", the command may hold spaces
                    if int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == me:
                        found.append(int(entry.name))
        return found

    def _watch(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            for pid in self._children():
                peak = peak_mb(pid)
                if peak == peak:  # not NaN: still there
                    self.peaks[pid] = max(self.peaks.get(pid, 0.0), peak)

    def stop(self) -> dict[int, float]:
        self._stop.set()
        self._thread.join()
        return self.peaks


def report_out(children: dict[int, float] | None = None, **values: float | int) -> None:
    """What a child prints for its parent: its measurements, then its peak memory, the largest
    peak of the processes it started (the problems view's workers: `children`, from
    ChildPeaks) and the sum of all those peaks (what they could hold at once, at most)."""
    for name, value in values.items():
        print(f"MEASURED {name} {value}")
    own, theirs = peak_mb(), list((children or {}).values())
    print(f"MEASURED peak_mb {own:.0f}", flush=True)
    print(f"MEASURED children_peak_mb {max(theirs, default=0):.0f}", flush=True)
    print(f"MEASURED total_peak_mb {own + sum(theirs):.0f}", flush=True)


def child(kind: str, args: list[str]) -> None:
    """Run one measured command in this (fresh) process."""
    import contextlib
    import io

    started = time.perf_counter()
    if kind == "cli":
        from orchestrator.cli import main as cli

        with contextlib.redirect_stdout(io.StringIO()):
            code = cli(args)
        report_out(work_s=time.perf_counter() - started, exit=code)
    elif kind == "report":
        peaks = ChildPeaks()
        store_time = _report_with_store_time(args)
        report_out(peaks.stop(), **store_time, work_s=time.perf_counter() - started)
    elif kind == "plan":
        report_out(**plan_parts(Path(args[0]), int(args[1])))
    elif kind == "pandas":
        import pandas

        frame = pandas.read_parquet(f"{args[0]}/scores")
        report_out(work_s=time.perf_counter() - started, rows=len(frame))
    elif kind == "duckdb":
        import duckdb

        n = duckdb.sql(f"SELECT count(*) FROM '{args[0]}/executions/*.parquet'").fetchall()[0][0]
        counted = time.perf_counter()
        scores = duckdb.sql(f"SELECT * FROM '{args[0]}/scores/*.parquet'").fetch_arrow_table()
        report_out(
            count_s=counted - started,
            rows=n,
            scores_s=time.perf_counter() - counted,
            scores=scores.num_rows,
        )


def _report_with_store_time(args: list[str]) -> dict[str, float]:
    """`reprogrid report`, timing every read of the store it makes (the rest is analysis and
    rendering; with html, the problems view's processes read too, and a thread of this one:
    that time is not counted)."""
    import contextlib
    import io

    from orchestrator.cli import main as cli

    spent, depth = [0.0], [0]
    for name in ("read_table", "read_shard", "shards", "manifest"):
        original = getattr(Store, name)

        def timed(self, *a, _original=original, **k):
            t = time.perf_counter()
            depth[0] += 1
            try:
                return _original(self, *a, **k)
            finally:
                depth[0] -= 1
                if depth[0] == 0:  # the outermost call only (read_table calls read_shard)
                    spent[0] += time.perf_counter() - t

        setattr(Store, name, timed)
    with contextlib.redirect_stdout(io.StringIO()):
        cli(args)
    return {"store_s": spent[0]}


def plan_parts(root: Path, n_models: int) -> dict[str, float]:
    """What `reprogrid plan` does, for a grid of synthetic models the config cannot name, by
    part: the grid (config and expansion), the plan (the store's index) and the plan as data
    (the samples each setting holds, the measured throughput, the estimate), rendered."""
    from orchestrator.report.screens.planview import render_plan
    from orchestrator.run.estimate.estimator import plan_json
    from orchestrator.run.plan.state import make_plan
    from orchestrator.run.preflight.checks import preflight

    started = time.perf_counter()
    prepared = prepared_grid(root, n_models)
    grid = time.perf_counter()
    store = Store(str(root))
    plan = make_plan(store, prepared)
    planned = time.perf_counter()
    render_plan(plan_json(plan, prepared, store, preflight(prepared, plan)))
    done = time.perf_counter()
    return {
        "work_s": done - started,
        "grid_s": grid - started,
        "index_s": planned - grid,
        "data_s": done - planned,
        "done": sum(1 for item in plan.settings if item.action.value == "done"),
    }


@dataclasses.dataclass(frozen=True)
class Measured:
    wall_s: float  # the whole process: interpreter start, imports, the work
    values: dict[str, float]  # what the process measured itself (work_s, peak_mb, ...)


def run_measured(kind: str, args: list[str], env: dict[str, str]) -> Measured:
    """Run `child(kind, args)` in a fresh process; its wall time and what it measured."""
    command = [sys.executable, __file__, "--child", kind, "--", *args]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - started
    values = {
        line.split()[1]: float(line.split()[2])
        for line in done.stdout.splitlines()
        if line.startswith("MEASURED ")
    }
    if done.returncode != 0 or "peak_mb" not in values:
        raise RuntimeError(f"{kind} {args[:3]} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return Measured(wall, values)


def measure(root: Path, n_models: int, env: dict[str, str]) -> dict[str, Measured]:
    report_dir = root.parent / f"{root.name}-report"
    shutil.rmtree(report_dir, ignore_errors=True)
    report = ["report", "--store", str(root), "--out", str(report_dir), "--format"]
    files = run_measured("report", [*report, "md,csv,json"], env)
    shutil.rmtree(report_dir, ignore_errors=True)
    return {
        "status": run_measured("cli", ["status", "--store", str(root)], env),
        "plan": run_measured("plan", [str(root), str(n_models)], env),
        "report": files,
        "report_html": run_measured("report", [*report, "md,csv,html,json"], env),
        "verify": run_measured("cli", ["verify", "--store", str(root)], env),
        "pandas": run_measured("pandas", [str(root)], env),
        "duckdb": run_measured("duckdb", [str(root)], env),
    }


def store_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*.parquet") if "quarantine" not in p.parts]
    return len(files), sum(p.stat().st_size for p in files)


ROWS = [
    ("files (packs + generations)", lambda r: f"{r['files']:,}"),
    ("MB on disk", lambda r: f"{r['bytes'] / 1e6:.0f}"),
    ("status: process s (work s)", lambda r: _two(r["m"]["status"], "work_s")),
    ("plan: process s (work s)", lambda r: _two(r["m"]["plan"], "work_s")),
    ("  of which the index s", lambda r: f"{r['m']['plan'].values['index_s']:.2f}"),
    ("  of which samples, estimate s", lambda r: f"{r['m']['plan'].values['data_s']:.2f}"),
    ("report md,csv,json: process s (store s)", lambda r: _two(r["m"]["report"], "store_s")),
    ("report +html, problems view: process s", lambda r: f"{r['m']['report_html'].wall_s:.1f}"),
    ("verify: process s (work s)", lambda r: _two(r["m"]["verify"], "work_s")),
    ("pandas.read_parquet(scores) s", lambda r: f"{r['m']['pandas'].values['work_s']:.2f}"),
    ("DuckDB count(*) executions s", lambda r: f"{r['m']['duckdb'].values['count_s']:.2f}"),
    ("DuckDB SELECT * scores s", lambda r: f"{r['m']['duckdb'].values['scores_s']:.2f}"),
    (
        "peak MB: status/plan/report/verify",
        lambda r: "/".join(
            f"{r['m'][c].values['peak_mb']:.0f}" for c in ("status", "plan", "report", "verify")
        ),
    ),
    (
        "peak MB: +html (view worker; sum)",
        lambda r: "{:.0f} ({:.0f}; {:.0f})".format(
            r["m"]["report_html"].values["peak_mb"],
            r["m"]["report_html"].values["children_peak_mb"],
            r["m"]["report_html"].values["total_peak_mb"],
        ),
    ),
]


def _two(m: Measured, part: str) -> str:
    return f"{m.wall_s:.1f} ({m.values[part]:.1f})"


def table(sizes: list[int], results: dict[int, dict[str, Any]]) -> str:
    lines = ["settings" + " " * 30 + "".join(f"{n:>20,}" for n in sizes)]
    for name, cell in ROWS:
        lines.append(f"{name:38}" + "".join(f"{cell(results[n]):>20}" for n in sizes))
    return "\n".join(lines)


def scaling(sizes: list[int], results: dict[int, dict[str, Any]]) -> str:
    """Seconds per 1,000 settings of each command's process at each size (flat or falling:
    linear or better)."""
    out = ["process seconds per 1,000 settings" + "".join(f"{n:>10,}" for n in sizes)]
    for name in ("status", "plan", "report", "report_html", "verify"):
        per = [results[n]["m"][name].wall_s / n * 1000 for n in sizes]
        out.append(f"  {name:32}" + "".join(f"{p:>10.2f}" for p in per))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="660,6000", help="settings per store (rounded to whole models of 60)"
    )
    parser.add_argument("--root", default=None, help="where to build the stores (default: a temp)")
    parser.add_argument("--loose", action="store_true", help="build through write_rows + compact")
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    parser.add_argument("--reuse", action="store_true", help="measure the stores already in --root")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.rest)
        return 0
    # whole models of 60 settings each: 20,000 is 333 models, 19,980 settings
    sizes = [
        max(1, round(int(n) / SETTINGS_PER_MODEL)) * SETTINGS_PER_MODEL
        for n in args.sizes.split(",")
    ]
    base = Path(args.root or tempfile.mkdtemp(prefix="store-scale-"))
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    results: dict[int, dict[str, Any]] = {}
    try:
        for n in sizes:
            root = base / f"store-{n}"
            if not (args.reuse and root.is_dir()):
                shutil.rmtree(root, ignore_errors=True)
                built = build(root, n // SETTINGS_PER_MODEL, args.loose)
                how = "write_rows + compact" if args.loose else "fast path"
                print(
                    f"{n:,} settings ({n // SETTINGS_PER_MODEL} models): built in "
                    f"{built['write_s']:.0f} s ({how}), compact {built['compact_s']:.1f} s",
                    flush=True,
                )
            files, size = store_size(root)
            load = os.getloadavg()[0]
            results[n] = {"files": files, "bytes": size, "m": measure(root, n // 60, env)}
            done = int(results[n]["m"]["plan"].values["done"])
            print(
                f"  measured (load average {load:.1f} before, {os.getloadavg()[0]:.1f} after); "
                f"plan: {done:,} of {n:,} settings done",
                flush=True,
            )
            print(table([n], results), flush=True)
        print(f"\n{os.cpu_count()} cores; each command in a fresh process, one after the other")
        print(table(sizes, results))
        print(scaling(sizes, results))
    finally:
        if not args.keep and args.root is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
