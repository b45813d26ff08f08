"""Subcommands about the store itself: `verify` (check every byte) and `compact` (pack the
shards of finished work; docs/store.md, "Compaction").

Registered into `reprogrid` by orchestrator/cli/main.py (`register(subparsers)` and `COMMANDS`).
"""

from __future__ import annotations

import argparse
import json

from orchestrator.cli.common import add_store, existing_store
from orchestrator.cli.common import out as _out


def register(sub) -> None:
    """Add `verify` and `compact`."""
    _register_verify(sub)
    _register_compact(sub)


def _register_verify(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="check every shard of a store (checksums, schema, rows, foreign files) and every "
        "complete setting's results; exits 1 on any problem",
        description="Check a whole store (docs/store.md). Without --fix nothing is moved; with "
        "--fix damaged and foreign files go to <store>/quarantine/ (never deleted) and the next "
        "plain `run` redoes their settings.",
    )
    add_store(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--fix",
        action="store_true",
        help="quarantine what is damaged (takes the store's writer lock)",
    )
    p.add_argument(
        "--wait-lock",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="with --fix: wait this long for another writer",
    )


def cmd_verify(args: argparse.Namespace) -> int:
    from storage.store import Store
    from storage.verify import verify_store

    existing_store(args.store)
    store = Store(args.store)
    if args.fix:
        with store.writer_lock(wait_s=args.wait_lock):
            report = verify_store(store, fix=True)
    else:
        report = verify_store(store)
    data = report.to_json()
    if args.json:
        _out(json.dumps(data, indent=2))
    else:
        _out(render_verify(data))
    return 0 if report.ok else 1


def render_verify(data: dict) -> str:
    lines = [
        f"store {data['store']}: " + ("ok" if data["ok"] else f"{len(data['problems'])} problem(s)")
    ]
    for table, summary in data["tables"].items():
        trusted = ", ".join(f"{n} {how}" for how, n in summary["trusted"].items() if n)
        lines.append(
            f"  {table}: {summary['files']} file(s), {summary['bytes']} bytes"
            + (f" ({trusted})" if trusted else "")
        )
    for problem in data["problems"]:
        where = problem.get("file") or problem.get("setting_key") or ""
        lines.append(
            f"PROBLEM {problem['kind']} {problem.get('table') or ''} {where}: "
            f"{problem.get('detail') or ''}".rstrip()
        )
    for q in data["quarantined"]:
        lines.append(f"quarantined {q['table']}/{q['file']} -> {q['moved_to']}")
    if data["settings_to_redo"]:
        lines.append(
            f"the next run redoes {len(data['settings_to_redo'])} setting(s): "
            + ", ".join(k[:12] for k in data["settings_to_redo"])
        )
    lines += [f"note: {n}" for n in data["notes"]]
    return "\n".join(lines)


def _register_compact(sub) -> None:
    p = sub.add_parser(
        "compact",
        help="pack the shards of finished settings into a few files (what every run does at its "
        "end), and finish a compaction a kill cut short",
        description="Pack the settings, executions, scores, runs and repeat-check shards of "
        "finished work into packs named by the store's manifest, so that status, plan, report, "
        "verify and any Parquet reader read a few files instead of one per setting "
        "(docs/store.md). Takes the store's writer lock. Generations stay one file per setting.",
    )
    add_store(p)
    p.add_argument("--json", action="store_true", help="print what was done as JSON")
    p.add_argument(
        "--wait-lock",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another writer (default: exit)",
    )


def cmd_compact(args: argparse.Namespace) -> int:
    from storage.compact import compact
    from storage.store import Store

    store = Store(existing_store(args.store))
    with store.writer_lock(wait_s=args.wait_lock):
        report = compact(store)
    data = report.to_json()
    _out(json.dumps(data, indent=2) if args.json else render_compact(data))
    return 0


def render_compact(data: dict) -> str:
    lines = [f"store {data['store']}: compacted"]
    for table, t in data["tables"].items():
        packed = f", {t['shards_packed']} shard(s) into {t['packs_written']} pack(s)"
        lines.append(
            f"  {table}: {t['files_before']} -> {t['files_after']} file(s)"
            + (packed if t["packs_written"] else "")
        )
    recovered = {k: v for k, v in data["recovered"].items() if v}
    if recovered:
        done = ", ".join(f"{k} {v}" for k, v in recovered.items())
        lines.append(f"finished an interrupted compaction: {done}")
    lines.append(f"{data['recorded']} loose shard(s) recorded as checked (readers trust them)")
    return "\n".join(lines)


COMMANDS = {"verify": cmd_verify, "compact": cmd_compact}
