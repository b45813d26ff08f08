"""Subcommands comparing backends: `compare-backends` and `repeat-check` (docs/vllm.md).

Registered into `reprogrid` by orchestrator/cli/main.py (`register(subparsers)`, `COMMANDS`).
The logic is in orchestrator/analysis/agreement.py (pure), report/screens/compare.py (the store) and
tools/repeat_check.py, which loads a backend in this process, imported inside the command.
"""

from __future__ import annotations

import json

from orchestrator.cli.common import add_store, existing_store
from orchestrator.cli.common import out as _out


def register(sub) -> None:
    """Add `compare-backends` and `repeat-check` to the subparsers."""
    p = sub.add_parser(
        "compare-backends",
        help="agreement of settings that differ only in the backend or its keyed options (hf "
        "vs vllm, batched transformers vs batch 1): identical programs, same pass/fail, pass@1 "
        "difference",
        description="Pair the store's complete settings whose keyed fields are equal except "
        "for the backend and its keyed options, and compare their samples (docs/vllm.md).",
    )
    add_store(p)
    p.add_argument("--json", action="store_true", help="print as JSON")

    p = sub.add_parser(
        "repeat-check",
        help="re-generate the first N problems of finished settings and report the flip rate "
        "(share of changed programs) and the outcome changes per backend; recorded in the "
        "store as the noise floor of the report's paired tests",
        description="Determinism check: re-generate through the setting's own backend, in this "
        "process, compare with the stored samples, run the changed programs, and record the "
        "result in the store's repeat_checks table (docs/vllm.md, docs/statistics.md).",
    )
    add_store(p)
    p.add_argument(
        "--setting",
        action="append",
        required=True,
        metavar="KEY",
        help="a setting key or a unique prefix of one; repeat for several settings",
    )
    p.add_argument("-n", type=int, default=20, metavar="N", help="first N problems (default 20)")
    p.add_argument(
        "--wait-lock",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another writer of the store before recording (default: fail "
        "at once); the lock is taken only to record, after re-generating",
    )
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="the overrides of the run that produced the settings (default: read from the "
        "store's runs table)",
    )


def cmd_compare_backends(args) -> int:
    from orchestrator.report.screens.compare import compare_backends, render_comparison
    from storage.store import Store

    data = compare_backends(Store(existing_store(args.store)))
    _out(json.dumps(data, indent=2) if args.json else render_comparison(data))
    return 0


def cmd_repeat_check(args) -> int:
    from orchestrator.tools.repeat_check import render_repeat_check, repeat_check
    from storage.store import Store

    data = repeat_check(
        Store(existing_store(args.store)),
        args.setting,
        args.n,
        overrides=args.overrides or None,
        wait_lock_s=args.wait_lock,
    )
    _out(json.dumps(data, indent=2) if args.json else render_repeat_check(data))
    return 0


COMMANDS = {"compare-backends": cmd_compare_backends, "repeat-check": cmd_repeat_check}
