"""`reprogrid show` (one problem of one setting in the terminal) and `reprogrid view` (the
problems view of a store, a static folder for the browser). docs/report.md, "Problems".

Registered into `reprogrid` by orchestrator/cli/main.py (`register(subparsers)` and `COMMANDS`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from orchestrator.cli.common import (
    add_skip_damaged,
    add_store,
    damage_of,
    existing_store,
    print_left_out,
)
from orchestrator.cli.common import out as _out


def register(sub) -> None:
    p = sub.add_parser(
        "show",
        help="one problem of one setting: prompt, continuation, program, outcome, error",
        description="Print one stored sample of a problem under a setting: the prompt, the raw "
        "continuation, the post-processed program, the test outcome and its error. --diff "
        "prints a unified diff of the program against another setting's.",
    )
    add_store(p)
    p.add_argument(
        "--setting", required=True, metavar="KEY", help="setting key, or a unique prefix"
    )
    p.add_argument("--problem", required=True, metavar="TASK", help="task id, e.g. Python/7")
    p.add_argument("--sample", type=int, default=0, metavar="N", help="sample index (default 0)")
    p.add_argument(
        "--diff",
        default=None,
        metavar="KEY2",
        help="also show the same sample under setting KEY2, with a unified diff of the programs",
    )
    p.add_argument("--json", action="store_true", help="print the sample(s) and diff as JSON")
    add_skip_damaged(
        p,
        ": the --diff setting's sample is then left out (the setting asked for is refused "
        "either way: it cannot be shown without its files)",
    )
    v = sub.add_parser(
        "view",
        help="write the problems view (problems x settings in the browser) of a store",
        description="Write a static folder (index.html and data files) that shows each model's "
        "problems x settings, every sample's prompt, continuation, program and outcome, and the "
        "paired counts of two settings. Open index.html in a browser; nothing is loaded from "
        "outside the folder. A model's files are written once and reused while its settings "
        "and files are unchanged. `reprogrid report --format html` writes the same into "
        "<report>/problems/.",
    )
    add_store(v)
    v.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output folder (default: <store>-report/problems, where the report links to)",
    )
    v.add_argument(
        "--resamples",
        type=int,
        default=None,
        metavar="N",
        help="resamples of the interval the page computes on request for two settings "
        "(default 10000, as `compare`)",
    )
    add_skip_damaged(v, " in printed notes")


def _show_text(sample, setting: dict) -> str:
    from orchestrator.report.tables.labels import axes_label, setting_axes
    from orchestrator.report.tables.mismatch import SAMPLE_NOTE

    label = axes_label(setting_axes(setting))
    flags = [
        f
        for f, on in (
            ("prompt truncated", sample.prompt_truncated),
            ("hit the length limit", sample.hit_length_limit),
            ("decode mismatch", sample.decode_mismatch),
        )
        if on
    ]
    error = ": ".join(x for x in (sample.error_type, sample.error_message) if x)
    lines = [
        f"setting  {sample.setting_key[:12]}  {setting['model_name']}  {label}",
        f"problem  {sample.task_id}  sample {sample.sample_index}",
        f"outcome  {sample.state.value}"
        + (f" (stored outcome {sample.outcome})" if sample.outcome != sample.state.value else "")
        + (f"  [{', '.join(flags)}]" if flags else ""),
        f"error    {error or '-'}",
        *([f"note     {SAMPLE_NOTE}"] if sample.decode_mismatch else []),
        f"--- prompt ({sample.n_prompt_tokens} tokens) ---",
        sample.prompt.rstrip("\n"),
        f"--- continuation ({sample.n_output_tokens} tokens) ---",
        sample.continuation.rstrip("\n"),
        "--- program ---",
        sample.program.rstrip("\n"),
    ]
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    from orchestrator.report.tables.damaged import SHOW_READS
    from orchestrator.report.view.inspection import (
        pick_sample,
        problem_samples,
        program_diff,
        resolve_setting,
        setting_row,
    )
    from storage.damage import damaged_error
    from storage.store import Store

    store = Store(existing_store(args.store))
    keys = [resolve_setting(store, args.setting)]
    if args.diff is not None:
        keys.append(resolve_setting(store, args.diff))
    damage = damage_of(args.store, SHOW_READS, args.skip_damaged, keys)
    if keys[0] in damage.settings:  # the setting asked for cannot be left out
        raise damaged_error(damage, skippable=False)
    keys = [k for k in keys if k not in damage.settings]
    picked = [pick_sample(problem_samples(store, k, args.problem), args.sample) for k in keys]
    settings = [setting_row(store, k) for k in keys]
    diff = program_diff(picked[0], picked[1]) if len(picked) == 2 else None
    if args.json:
        shown = [
            s.to_json() | {"setting": _plain(r)} for s, r in zip(picked, settings, strict=True)
        ]
        payload: dict = {"sample": shown[0]}
        if damage.files:  # a --diff setting left out (--skip-damaged)
            payload["left_out"] = list(damage.left_out())
        if diff is not None:
            payload.update(other=shown[1], diff=diff)
        _out(json.dumps(payload, indent=2, default=str))
        return 0
    print_left_out(damage)
    _out(_show_text(picked[0], settings[0]))
    if diff is not None:
        _out("")
        _out(_show_text(picked[1], settings[1]))
        _out("--- diff of the programs ---")
        _out(diff.rstrip("\n") or "(the programs are identical)")
    return 0


def _plain(row: dict) -> dict:
    """The settings row's axes and identity (not its provenance blobs)."""
    keep = (
        "setting_key",
        "model_name",
        "model_revision",
        "benchmark",
        "variant",
        "template",
        "decoding",
        "max_length",
        "precision",
        "backend",
        "n_samples",
        "status",
    )
    return {k: row.get(k) for k in keep}


def default_view_out(store: str) -> Path:
    """Where the report's links point: <store>-report/problems (./report/problems for a URI)."""
    from orchestrator.cli.report import _default_out
    from orchestrator.report.view.folder import VIEW_DIR

    return Path(_default_out(store)) / VIEW_DIR


def cmd_view(args: argparse.Namespace) -> int:
    from orchestrator.report.view.folder import Resampling, ViewOptions, write_view
    from storage.store import Store

    store = Store(existing_store(args.store))
    out = Path(args.out) if args.out else default_view_out(args.store)
    link = "../report.html" if (out.parent / "report.html").is_file() else None
    resampling = Resampling() if args.resamples is None else Resampling(n_resamples=args.resamples)
    options = ViewOptions(out, link, args.skip_damaged, resampling)
    summary = write_view(store, options)  # the files it reads checked first: plan_view
    print_left_out(summary.damage)
    _out(
        f"problems view: {len(summary.groups)} model(s), {summary.n_settings} setting(s), "
        f"{summary.n_problem_files} problem file(s); {len(summary.built)} model(s) built, "
        f"{len(summary.groups) - len(summary.built)} unchanged; the page opens with "
        f"{summary.first_page_bytes / 1e6:.2f} MB"
    )
    _out(f"open {Path(summary.out) / 'index.html'}")
    return 0


COMMANDS = {"show": cmd_show, "view": cmd_view}
