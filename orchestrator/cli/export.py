"""`reprogrid export --format eee`: a store's scores, and separately the literature table, as
Every Eval Ever records (docs/install.md, "Results in the Every Eval Ever format");
`--format mlflow`: each scored setting as an MLflow run (docs/report.md, "Experiment trackers").

Registered into `reprogrid` by orchestrator/cli/main.py (`register(subparsers)` and `COMMANDS`).
"""

from __future__ import annotations

import argparse
import logging
import time

from orchestrator.cli.common import (
    add_skip_damaged,
    add_store,
    damage_of,
    existing_store,
    print_left_out,
)
from orchestrator.cli.common import out as _out

logger = logging.getLogger(__name__)


def register(sub) -> None:
    from orchestrator.report.choices import ExportFormat

    p = sub.add_parser(
        "export",
        help="write a store's scores in a shared format (eee) or to a tracker (mlflow)",
        description="eee: write every scored setting of a store as an Every Eval Ever record "
        "(<out>/scores/data/...), and the literature values as records of their own "
        "(<out>/literature/data/...); settings, provenance and the setting key travel in the "
        "records' generation and source details. mlflow: log every scored setting as an MLflow "
        "run (axes and revision as parameters, pass@1, its interval and the counts as metrics, "
        "the harness generations.json as an artifact) in one experiment per store; exporting "
        "again updates the runs.",
    )
    add_store(p)
    p.add_argument(
        "--format",
        required=True,
        choices=[f.value for f in ExportFormat],
        help="eee: Every Eval Ever (EvalEval Coalition), schema 0.3.0; mlflow: MLflow runs",
    )
    p.add_argument(
        "--out", default=None, metavar="DIR", help="eee: folder to write the records to (needed)"
    )
    p.add_argument(
        "--tracking-uri",
        default=None,
        metavar="URI",
        help="mlflow: the tracking server or store (default: MLFLOW_TRACKING_URI, else the folder "
        "mlruns in the store's report folder, <store>-report/mlruns)",
    )
    p.add_argument(
        "--experiment",
        default=None,
        metavar="NAME",
        help="mlflow: the experiment (default: 'reprogrid ' + the store's absolute path)",
    )
    _literature_and_eee_options(p)
    add_skip_damaged(
        p,
        " in printed notes and, eee, in <out>/left_out.json; mlflow, as experiment tags "
        "reprogrid.left_out.<setting key>",
    )


def _literature_and_eee_options(p) -> None:
    """The literature's options (both formats) and the EEE records' own."""
    from orchestrator.report.choices import EvaluatorRelationship

    p.add_argument(
        "--literature",
        default=None,
        metavar="FILE",
        help="one benchmark's published values instead of its card's (as `report "
        "--literature`; default: each of the store's benchmarks' own)",
    )
    p.add_argument(
        "--mapping",
        default=None,
        metavar="YAML",
        help="literature-name -> model-name mapping for the benchmark it names (default: each "
        "benchmark card's)",
    )
    p.add_argument("--no-literature", action="store_true", help="export the store's scores only")
    p.add_argument(
        "--no-pilots",
        action="store_true",
        help="leave out pilots: settings over a subset of the problems (benchmark.limit, "
        "benchmark.problems); without it they are exported, marked as subsets",
    )
    p.add_argument(
        "--organization",
        default="reprogrid",
        metavar="NAME",
        help="who provides the records (source_organization_name; default reprogrid)",
    )
    p.add_argument(
        "--evaluator-relationship",
        default="third_party",
        choices=[r.value for r in EvaluatorRelationship],
        help="who ran the evaluation, against the model (default third_party)",
    )


def repo_id_from_config(model_name: str) -> str | None:
    """The Hugging Face id of a configured model (sweeps/model/<name>.yaml); None if unknown."""
    from orchestrator.errors import ConfigError
    from orchestrator.run.config.compose import available, compose_config

    if model_name not in available("model"):
        return None
    try:
        return str(compose_config([f"model={model_name}"]).model.repo_id)
    except ConfigError as e:
        logger.warning("model config %s unreadable (%s): its id is left out", model_name, e)
        return None


def cmd_export(args: argparse.Namespace) -> int:
    from orchestrator.cli.report import card_from_registry, data_dir_from_config
    from orchestrator.report.exports.eee import EeeOptions, EvaluatorRelationship
    from orchestrator.report.exports.eee_export import (
        ExportFormat,
        LiteratureSource,
        export_eee,
        parse_format,
    )
    from orchestrator.report.tables.damaged import EEE_READS
    from orchestrator.report.tables.data import ReportOptions
    from storage.store import Store

    if parse_format(args.format) is ExportFormat.MLFLOW:
        return _export_mlflow(args)
    existing_store(args.store)
    if args.out is None:
        raise ValueError("export --format eee needs --out DIR (the folder for the records)")
    damage = damage_of(args.store, EEE_READS, args.skip_damaged)
    options = EeeOptions(
        organization=args.organization,
        relationship=EvaluatorRelationship(args.evaluator_relationship),
        pilots=not args.no_pilots,
        card_of=card_from_registry,
        engine_names=engine_names_from_registry(),
    )
    literature = None
    if not args.no_literature:
        given = ReportOptions(
            literature_path=args.literature,
            mapping_path=args.mapping,
            data_dir=data_dir_from_config(),
            card_of=card_from_registry,
        )
        literature = LiteratureSource(given, repo_id_from_config)
    summary = export_eee(Store(args.store), args.out, options, literature, int(time.time()), damage)
    for note in summary.notes:
        _out(f"note: {note}")
    left_out = f" ({summary.pilots_left_out} pilot(s) left out)" if summary.pilots_left_out else ""
    _out(
        f"{summary.out}: {len(summary.scores)} score record(s) in {summary.out}/scores{left_out}, "
        f"{len(summary.literature)} literature record(s) in {summary.out}/literature"
    )
    return 0


def default_experiment(store: str) -> str:
    """One experiment per store: named after the store's absolute path (or its URI)."""
    from pathlib import Path

    return f"reprogrid {store if '://' in store else Path(store).resolve()}"


def tracking_uri_of(given: str | None, environment: str | None, store: str) -> tuple[str, bool]:
    """The tracking URI an export logs to, and whether it is reprogrid's default: --tracking-uri,
    else MLFLOW_TRACKING_URI (`environment`), else a file store `mlruns` in the store's report
    folder. Not MLflow's own default, sqlite:///mlflow.db in the working folder: a database
    store needs SQLAlchemy, which the skinny client of the `mlflow` extra does not have."""
    from pathlib import Path

    from orchestrator.cli.report import _default_out

    if given:
        return given, False
    if environment:
        return environment, False
    return (Path(_default_out(store)).resolve() / "mlruns").as_uri(), True


def _export_mlflow(args: argparse.Namespace) -> int:
    import os

    from orchestrator.report.exports.eee_export import problem_counts_of
    from orchestrator.report.exports.mlflow_runs import export_mlflow, tracked_runs
    from orchestrator.report.tables.damaged import (
        MLFLOW_READS,
        left_out_by_name,
        rows_without_damaged,
    )
    from orchestrator.report.tables.data import ReportOptions
    from orchestrator.report.tables.grid import read_frame
    from orchestrator.report.tables.records import records
    from orchestrator.tools.harness_io import export_entries
    from storage.index import build_index
    from storage.store import Store

    store = Store(existing_store(args.store))
    damage = damage_of(args.store, MLFLOW_READS, args.skip_damaged)
    scores = rows_without_damaged(records(read_frame(store, "scores")), damage)
    settings = rows_without_damaged(records(read_frame(store, "settings")), damage)
    pass1 = [s["setting_key"] for s in scores if s.get("metric") == "pass@1"]
    runs = tracked_runs(scores, settings, problem_counts_of(store, pass1), ReportOptions())
    index = build_index(store)
    experiment = args.experiment or default_experiment(args.store)
    # MLflow's own variable, read here (the CLI is where configuration enters) to pick the store
    uri, default = tracking_uri_of(
        args.tracking_uri, os.environ.get("MLFLOW_TRACKING_URI"), args.store
    )
    summary = export_mlflow(
        runs,
        uri,
        experiment,
        lambda key: export_entries(store, key, index),
        int(time.time() * 1000),
        allow_file_store=default,
        left_out=left_out_by_name(damage),
    )
    print_left_out(damage)
    _out(
        f"mlflow {summary.tracking_uri}: experiment {summary.experiment!r} "
        f"(id {summary.experiment_id}): {len(summary.created)} run(s) created, "
        f"{len(summary.updated)} updated"
    )
    return 0


COMMANDS = {"export": cmd_export}


def engine_names_from_registry() -> dict[str, str]:
    """Each registered backend's name as an inference engine (its definition says it)."""
    from workers.backends.registry import backend_definitions

    return {d.name: d.export_name for d in backend_definitions()}
