"""Subcommands for reading a store: `report`, `export-generations`, `import-generations`.

Registered into `reprogrid` by orchestrator/cli/main.py (`register(subparsers)` and `COMMANDS`).
Options are documented in docs/report.md.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.cli.common import add_skip_damaged, add_store, existing_store
from orchestrator.cli.common import out as _out
from workers.card import BenchmarkCard

if TYPE_CHECKING:
    from threadpoolctl import threadpool_limits

    from orchestrator.report.tables.data import ReportOptions
    from storage.damage import StoreDamage

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
    from orchestrator.analysis.baseline import parse_baseline
    from orchestrator.report.choices import parse_formats
    from orchestrator.report.tables.damaged import REPORT_READS
    from orchestrator.report.tables.early import check_baseline_early
    from orchestrator.report.view.folder import VIEW_DIR, Resampling, ViewOptions, write_view
    from orchestrator.report.view.plan import Checked, plan_view
    from storage.damage import damaged_error, find_damage
    from storage.store import Store

    formats = parse_formats(args.format)
    store = Store(existing_store(args.store))
    baseline = parse_baseline(args.baseline)
    out = Path(args.out or _default_out(args.store))
    # Every file the report reads is checked before it reads any (report/tables/damaged.py),
    # the view's as it plans (view/plan.py): a store with a damaged one is refused first,
    # naming every one, or with --skip-damaged their settings are left out and named.
    found = find_damage(store, REPORT_READS)
    if not found.files or args.skip_damaged:
        check_baseline_early(store, baseline, found)  # a misspelt value fails at once
    plan = None
    if "html" in formats:  # which of the view's models to build; their files checked
        plan = plan_view(store, out / VIEW_DIR, args.skip_damaged, Checked(REPORT_READS, found))
    elif found.files and not args.skip_damaged:
        raise damaged_error(found)
    options = _report_options(args, baseline, plan.damage if plan is not None else found)

    from orchestrator.report.formats.render import write_report
    from orchestrator.report.tables.build import build_report

    with one_blas_thread():
        data = build_report(args.store, options)  # the options checked before any table
    link = None
    if plan is not None:  # the report's setting keys link to their column in the view
        shown = plan.keys
        link = lambda key: f"{VIEW_DIR}/index.html#setting={key}" if key in shown else None  # noqa: E731
    paths = write_report(data, out, formats, link)
    view = None
    if plan is not None:
        resampling = Resampling(options.n_resamples, options.confidence, options.seed)
        view_options = ViewOptions(out / VIEW_DIR, "../report.html", args.skip_damaged, resampling)
        view = write_view(store, view_options, plan)
    _print_report(data, paths, view)
    return 0


def one_blas_thread() -> threadpool_limits:
    """numpy's BLAS in one thread until the end of the returned object's `with` block. OpenBLAS
    starts a thread per core, and after each matrix product (the report's paired tests project
    its settings onto 10,000 draws) those threads spin waiting for more work: CPU taken from
    whatever else runs on the machine, this process's own next step included. Called while no
    other thread of this process may import an extension module: threadpoolctl walks the loaded
    libraries under the dynamic loader's lock."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _print_report(data, paths, view) -> None:
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


def _report_options(args: argparse.Namespace, baseline: dict, damage: StoreDamage) -> ReportOptions:
    from orchestrator.report.tables.data import ReportOptions

    defaults = ReportOptions()
    return ReportOptions(
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
