"""`reprogrid compare`: the paired test of two settings of a store (docs/statistics.md).

Registered into `reprogrid` by orchestrator/cli/main.py (`register(subparsers)`, `COMMANDS`).
The logic is in orchestrator/report/tables/pairs.py (the store) and orchestrator/analysis/paired.py
(the test).
"""

from __future__ import annotations

import json

from orchestrator.cli.common import add_skip_damaged, add_store, damage_of, existing_store
from orchestrator.cli.common import out as _out


def register(sub) -> None:
    """Add `compare` to the subparsers."""
    p = sub.add_parser(
        "compare",
        help="the paired test of two settings on the same problems: discordant counts, delta "
        "with its interval, exact McNemar or sign-flip p, detectable difference",
        description="Compare setting B with setting A on the problems both hold (B minus A). "
        "A and B are setting keys or unique prefixes, or selections KEY=VALUE[,KEY=VALUE...] "
        "over model, template, decoding, max_length, precision, backend, variant, benchmark, "
        "n_samples, tuning; an axis a selection does not name takes the effects baseline's "
        "value (template=own decoding=greedy max_length=2048 precision=bf16), KEY=* frees it "
        "(docs/statistics.md).",
    )
    add_store(p)
    p.add_argument("a", metavar="A", help="the reference setting: a key, a prefix or a selection")
    p.add_argument("b", metavar="B", help="the changed setting: a key, a prefix or a selection")
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a filter both selections share (e.g. --where model=deepseekcoder-1.3b-base); repeat "
        "for several",
    )
    p.add_argument(
        "--resamples",
        type=int,
        default=10_000,
        metavar="N",
        help="bootstrap and sign-flip resamples (default 10000)",
    )
    p.add_argument(
        "--confidence", type=float, default=0.95, metavar="P", help="interval level (default 0.95)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="resampling seed (default 0, the report's: the same numbers as its comparisons)",
    )
    p.add_argument("--json", action="store_true", help="print as JSON")
    add_skip_damaged(p, " in notes (and in --json's `left_out`)")


def cmd_compare(args) -> int:
    from orchestrator.report.tables.damaged import COMPARE_READS
    from orchestrator.report.tables.pairs import compare_settings, render_compare

    damage = damage_of(existing_store(args.store), COMPARE_READS, args.skip_damaged)
    data = compare_settings(
        args.store,
        args.a,
        args.b,
        args.where,
        n_resamples=args.resamples,
        confidence=args.confidence,
        seed=args.seed,
        damage=damage,
    )
    _out(json.dumps(data, indent=2) if args.json else render_compare(data))
    return 0


COMMANDS = {"compare": cmd_compare}
