"""`reprogrid export --format eee`: a store's scores, and separately the literature table, as
Every Eval Ever records (docs/install.md, "Results in the Every Eval Ever format").

Registered into `reprogrid` by orchestrator/cli/main.py (`register(subparsers)` and `COMMANDS`).
"""

from __future__ import annotations

import argparse
import logging
import time

from orchestrator.cli.common import add_store, existing_store
from orchestrator.cli.common import out as _out

logger = logging.getLogger(__name__)


def register(sub) -> None:
    from orchestrator.report.eee import EvaluatorRelationship
    from orchestrator.report.export import ExportFormat

    p = sub.add_parser(
        "export",
        help="write a store's scores (and the literature table) in a shared format (eee)",
        description="Write every scored setting of a store as an Every Eval Ever record "
        "(<out>/scores/data/...), and the literature values as records of their own "
        "(<out>/literature/data/...). Settings, provenance and the setting key travel in the "
        "records' generation and source details.",
    )
    add_store(p)
    p.add_argument(
        "--format",
        required=True,
        choices=[f.value for f in ExportFormat],
        help="eee: Every Eval Ever (EvalEval Coalition), schema 0.3.0",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the records to")
    p.add_argument(
        "--literature",
        default=None,
        metavar="CSV",
        help="literature CSV (default: the shipped HumanEvalFix-Python values)",
    )
    p.add_argument(
        "--mapping",
        default=None,
        metavar="YAML",
        help="literature-name -> model-name mapping (default: the shipped one)",
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
    from orchestrator.run.config import available, compose_config

    if model_name not in available("model"):
        return None
    try:
        return str(compose_config([f"model={model_name}"]).model.repo_id)
    except ConfigError as e:
        logger.warning("model config %s unreadable (%s): its id is left out", model_name, e)
        return None


def cmd_export(args: argparse.Namespace) -> int:
    from orchestrator.report.eee import EeeOptions, EvaluatorRelationship
    from orchestrator.report.export import LiteratureSource, export_eee, parse_format
    from orchestrator.report.grid import load_mapping
    from storage.literature import load_default_literature, load_literature
    from storage.store import Store

    parse_format(args.format)
    existing_store(args.store)
    options = EeeOptions(
        organization=args.organization,
        relationship=EvaluatorRelationship(args.evaluator_relationship),
        pilots=not args.no_pilots,
    )
    literature = None
    if not args.no_literature:
        rows = load_literature(args.literature) if args.literature else load_default_literature()
        literature = LiteratureSource(rows, load_mapping(args.mapping), repo_id_from_config)
    summary = export_eee(Store(args.store), args.out, options, literature, int(time.time()))
    left_out = f" ({summary.pilots_left_out} pilot(s) left out)" if summary.pilots_left_out else ""
    _out(
        f"{summary.out}: {len(summary.scores)} score record(s) in {summary.out}/scores{left_out}, "
        f"{len(summary.literature)} literature record(s) in {summary.out}/literature"
    )
    return 0


COMMANDS = {"export": cmd_export}
