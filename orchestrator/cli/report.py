"""Subcommands for reading a store: `report`, `export-generations`, `import-generations`.

Registered into `reprogrid` by orchestrator/cli/main.py (`register(subparsers)` and `COMMANDS`).
Options are documented in docs/report.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from orchestrator.cli.common import add_skip_damaged, add_store, damage_of, existing_store
from orchestrator.cli.common import out as _out
from workers.card import BenchmarkCard

logger = logging.getLogger(__name__)


def register(sub) -> None:
    """Add `report`, `export-generations` and `import-generations`."""
    _register_report(sub)
    _register_export(sub)
    _register_import(sub)


def _register_report(sub) -> None:
    from orchestrator.report.choices import FORMATS

    p = sub.add_parser(
        "report",
        help="tables, literature comparison, effects and plots for a store (md/csv/tex/html/json)",
        description="Join a store's scores with the literature values and write the report.",
    )
    add_store(p)
    out_help = (
        "output folder (default: <store>-report next to the store, ./report for an object-store "
        "URI; the report never writes into the store)"
    )
    p.add_argument("--out", default=None, help=out_help)
    p.add_argument(
        "--format",
        default=",".join(FORMATS),
        metavar="FORMATS",
        help=f"comma list of {', '.join(FORMATS)} (default: all)",
    )
    p.add_argument(
        "--literature",
        default=None,
        metavar="FILE",
        help="one benchmark's published values, in the format its card names (papers CSV or "
        "leaderboard), instead of its card's file (default: each benchmark's own, named by its "
        "card: docs/report.md); which benchmark: the --mapping's `benchmark:`, else the "
        "store's only one",
    )
    p.add_argument(
        "--mapping",
        default=None,
        metavar="YAML",
        help="literature-name -> model-name mapping for the benchmark its `benchmark:` names "
        "(default: each benchmark card's, e.g. storage/data/humanevalfix-mapping.yaml)",
    )
    p.add_argument(
        "--baseline",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="change the effects baseline (default template=own decoding=greedy max_length=2048 "
        "precision=bf16); axes: template, decoding, max_length, precision, backend; "
        "KEY=* frees one",
    )
    p.add_argument(
        "--resamples", type=int, default=None, help="bootstrap resamples (default 10000)"
    )
    p.add_argument("--confidence", type=float, default=None, help="interval level (default 0.95)")
    p.add_argument("--seed", type=int, default=None, help="bootstrap seed (default 0)")
    add_skip_damaged(p, " in the first lines of the report and its notes")


def _register_export(sub) -> None:
    p = sub.add_parser(
        "export-generations",
        help="write a stored setting's programs as a BigCode harness generations.json",
    )
    add_store(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--setting", metavar="KEY", help="setting key (or a unique prefix)")
    which.add_argument(
        "--all",
        action="store_true",
        help="every setting whose generations are all stored: one file per setting, "
        "<out>/<setting key>.json, and <out>/index.json (key -> setting)",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="PATH",
        help="the JSON file to write (with --all: the folder)",
    )


def _register_import(sub) -> None:
    p = sub.add_parser(
        "import-generations",
        help="score a BigCode harness generations.json and store it as a setting (backend replay)",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="FILE [KEY=VALUE ...]",
        help="the harness's generations JSON, then optional Hydra overrides (put overrides "
        "right after FILE, or after --setting)",
    )
    p.add_argument("--model", required=True, help="model config name (sweeps/model/<name>.yaml)")
    p.add_argument(
        "--setting",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="the setting the file was generated with, as overrides (template=instruct "
        "decoding=t0.2 max_length=512 precision=bf16 samples_per_call=5 ...); backend=hf|vllm "
        "names the backend it claims (default hf, the harness's transformers; stored as "
        "claimed_backend, the setting's backend stays replay)",
    )
    add_store(p, default=None)
    p.add_argument(
        "--wait-lock",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another writer of the store",
    )
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")


def _default_out(store: str) -> str:
    """Next to the store, never inside it (the store holds only what its writer wrote)."""
    if "://" in store:
        return "report"  # object stores: the report goes to the working folder
    path = Path(store).resolve() if Path(store).name in ("", ".", "..") else Path(store)
    return str(path.parent / f"{path.name}-report")


def cmd_report(args: argparse.Namespace) -> int:
    # What starts the view's workers first: they spawn and import (about 0.4 s each) on the
    # core this process's own start leaves idle, and the first reads the view's groups, while
    # this process imports pandas, reads the store's settings and checks the options; the
    # report's renderers come after.
    from orchestrator.analysis.baseline import parse_baseline
    from orchestrator.report.choices import parse_formats
    from orchestrator.report.view.viewpool import (
        ViewPool,
        one_blas_thread,
        small_pages,
        view_workers,
    )

    formats = parse_formats(args.format)
    existing_store(args.store)
    baseline = parse_baseline(args.baseline)
    html = "html" in formats
    link, view_job, stop, checked_ok = None, None, threading.Event(), threading.Event()
    # beside the view's workers, this process computes with one BLAS thread too (limited before
    # any thread of this process starts: `one_blas_thread`)
    blas = one_blas_thread() if html else contextlib.nullcontext()
    with blas, small_pages(), contextlib.ExitStack() as owned:  # small pages: `huge_pages`
        workers = view_workers() if html else 0
        pool = owned.enter_context(ViewPool(workers, behind=True)).start() if workers > 1 else None
        background = owned.enter_context(ThreadPoolExecutor(1))  # ends before the pool does
        from orchestrator.report.tables.damaged import report_reads
        from orchestrator.report.tables.data import ReportOptions
        from orchestrator.report.view.folder import (
            VIEW_DIR,
            groups_at,
            groups_without_damaged,
            view_groups,
        )
        from storage.store import Store

        # every file the report reads, checked before it reads any: a damaged one refused, or
        # with --skip-damaged its settings left out and named (report/tables/damaged.py)
        damage = damage_of(args.store, report_reads(html), args.skip_damaged)
        defaults = ReportOptions()
        options = ReportOptions(
            own_template_of=own_template_from_config,
            card_of=card_from_registry,
            data_dir=data_dir_from_config(),
            literature_path=args.literature,
            mapping_path=args.mapping,
            baseline=baseline,
            n_resamples=args.resamples if args.resamples is not None else defaults.n_resamples,
            confidence=args.confidence if args.confidence is not None else defaults.confidence,
            seed=args.seed if args.seed is not None else defaults.seed,
            damage=damage,
        )
        out = Path(args.out or _default_out(args.store))
        groups: Future = Future()  # the view's groups (`view_groups`)
        if html:
            if pool is not None:
                groups = pool.executor.submit(groups_at, Store(args.store).uri)
            else:
                groups.set_result(view_groups(Store(args.store)))
            # The view is written (by its processes) while this one computes and writes the
            # report. Its workers compute while the options are checked, on the core the check
            # leaves idle; they write nothing before `checked_ok`.
            view_job = background.submit(
                _write_problems_view, args.store, out, options, groups, stop, checked_ok, pool
            )
        try:
            from orchestrator.report.formats.render import write_report
            from orchestrator.report.tables.build import check_report, finish_report

            checked = check_report(args.store, options)  # a bad option fails here, before any file
            checked_ok.set()
            data = finish_report(checked)
            if html:  # the report's setting keys link to their column in the view
                shown = {
                    str(s["setting_key"])
                    for g in groups_without_damaged(groups.result(), damage)
                    for s in g.settings
                }
                link = lambda key: f"{VIEW_DIR}/index.html#setting={key}" if key in shown else None  # noqa: E731
            paths = write_report(data, out, formats, link)
            view = view_job.result() if view_job is not None else None
        except BaseException:  # Ctrl-C, or a failure: the view stops too, not after its work
            stop.set()
            raise
    for note in data.notes:
        _out(f"note: {note}")
    answers = data.table("answers")
    if not answers.empty:
        counts = answers["verdict"].value_counts().to_dict()
        _out("answers: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    findings = data.table("findings")
    counted = findings[findings["counts"].astype(bool)] if len(findings) else findings
    if len(findings):
        effects = ", ".join(f"{r.group} {r.topic} {r.values}" for r in counted.itertuples())
        _out(f"findings: {len(counted)} effect(s) count" + (f" ({effects})" if effects else ""))
    for path in paths:
        _out(str(path))
    if view is not None:
        _out(str(Path(view.out) / "index.html"))
    return 0


def _write_problems_view(store: str, out: Path, options, groups: Future, stop, ready, pool):
    from orchestrator.report.view.folder import VIEW_DIR, groups_without_damaged, write_view
    from orchestrator.report.view.problems import PairOptions
    from orchestrator.report.view.viewpool import view_workers
    from storage.store import Store

    pairing = PairOptions(options.n_resamples, options.confidence, options.seed)
    return write_view(
        Store(store),
        out / VIEW_DIR,
        pairing,
        report_link="../report.html",
        workers=view_workers(),
        groups=groups_without_damaged(groups.result(), options.damage),
        cancel=stop,
        ready=ready,
        pool=pool,
    )


def card_from_registry(benchmark: str) -> BenchmarkCard | None:
    """Today's card of a registered benchmark (for settings stored without one); None if the
    registry does not know it."""
    from workers.benchmarks.registry import UnknownBenchmark, get_benchmark

    try:
        return get_benchmark(benchmark).card
    except UnknownBenchmark as e:
        logger.warning("%s: its settings are not compared with published values", e)
        return None


def data_dir_from_config() -> str | None:
    """The data folder (`paths.data_dir`, or REPROGRID_DATA_DIR): where a benchmark card's
    `data:` literature lives."""
    from orchestrator.run.config.compose import compose_config

    value = compose_config([]).paths.data_dir
    return str(value) if value else None


def own_template_from_config(model_name: str) -> str | None:
    """The own template of a configured model (sweeps/model/<name>.yaml); None if unknown."""
    from orchestrator.errors import ConfigError
    from orchestrator.run.config.compose import available, compose_config

    if model_name not in available("model"):
        return None
    try:
        return str(compose_config([f"model={model_name}"]).model.own_template)
    except ConfigError as e:
        logger.warning("model config %s unreadable (%s): template kind by name", model_name, e)
        return None


def cmd_export_generations(args: argparse.Namespace) -> int:
    from orchestrator.tools.harness_io import (
        export_all,
        export_entries,
        resolve_setting_key,
        write_generations_json,
    )
    from storage.store import Store

    store = Store(existing_store(args.store))
    if args.all:
        for key, path, n_problems, n_samples in export_all(store, args.out):
            _out(f"{path}: {n_problems} problems x {n_samples} samples (setting {key[:12]})")
        _out(f"{args.out}/index.json: which setting each file holds")
        return 0
    key = resolve_setting_key(store, args.setting)
    entries = export_entries(store, key)
    path = write_generations_json(entries, args.out)
    n_samples = max(len(e) for e in entries)  # fewer for a prompt at the length limit
    _out(f"{path}: {len(entries)} problems x {n_samples} samples (setting {key[:12]})")
    return 0


def cmd_import_generations(args: argparse.Namespace) -> int:
    from orchestrator.tools.harness_import import import_generations

    file, *extra = args.inputs
    overrides = [*extra, *args.setting]
    if args.store:
        overrides.append(f"store={args.store}")
    outcome = import_generations(file, args.model, overrides, wait_lock_s=args.wait_lock)
    if args.json:
        _out(json.dumps(outcome.__dict__, indent=2))
    else:
        score = "-" if outcome.pass_at_1 is None else f"{100 * outcome.pass_at_1:.2f}%"
        claim = f", claims {outcome.claimed_backend}" if outcome.claimed_backend else ""
        _out(
            f"setting {outcome.setting_key} (backend replay{claim}; {outcome.file}): pass@1 "
            f"{score} ({outcome.n_passed} passing samples, {outcome.n_problems} problems x "
            f"{outcome.n_samples}); store {outcome.store}"
        )
    return 0


COMMANDS = {
    "report": cmd_report,
    "export-generations": cmd_export_generations,
    "import-generations": cmd_import_generations,
}
