"""What an answer leaves out of a store with damaged files (`--skip-damaged`; storage/damage.py
finds the files): every setting a damaged file holds rows of, named with the file and why, in
the report's first screen and notes, the view's and the comparison's output and every export."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from storage.damage import StoreDamage

if TYPE_CHECKING:  # `report` reads REPORT_READS before it needs pandas (a bad option: at once)
    import pandas as pd

# What an export writes beside its records: the settings left out and their damaged files.
LEFT_OUT_FILE = "left_out.json"
LEFT_OUT_HEADING = (
    "Left out: settings whose files are damaged (reprogrid verify --fix moves the files to the "
    "quarantine, then reprogrid run redoes the settings)"
)


def left_out(damage: StoreDamage | None) -> tuple[str, ...]:
    """One line per setting left out (and per damaged file of no setting); none without damage."""
    return damage.left_out() if damage is not None else ()


def without_damaged(settings: pd.DataFrame, damage: StoreDamage | None) -> pd.DataFrame:
    """The settings rows but those of settings a damaged file holds rows of."""
    if damage is None or not damage.settings or settings.empty:
        return settings
    kept = ~settings["setting_key"].isin(sorted(damage.settings))
    return settings[kept].reset_index(drop=True)


Row = TypeVar("Row", bound=dict)


def rows_without_damaged(rows: Sequence[Row], damage: StoreDamage | None) -> list[Row]:
    """`rows` (dicts with a setting_key) but those of settings a damaged file holds rows of."""
    skipped = damage.settings if damage is not None else frozenset()
    return [r for r in rows if r.get("setting_key") not in skipped]


def left_out_by_name(damage: StoreDamage | None) -> dict[str, str]:
    """Each setting left out (by key), and each damaged file of no setting (by table/file),
    with why: its damaged files (an experiment tracker's tags)."""
    if damage is None:
        return {}
    named = {
        key: "; ".join(f.describe() for f in damage.of_setting(key))
        for key in sorted(damage.settings)
    }
    named |= {f"{f.table}/{f.file}": f.describe() for f in damage.files if not f.settings}
    return named


def write_left_out(damage: StoreDamage | None, out: Path) -> Path | None:
    """`<out>/left_out.json`: the store, each setting left out with its damaged files, and each
    damaged file (none: no file, and an older one is removed so it never speaks for this
    export)."""
    path = out / LEFT_OUT_FILE
    if damage is None or not damage.files:
        path.unlink(missing_ok=True)
        return None
    out.mkdir(parents=True, exist_ok=True)
    document = {"store": damage.store, **damage.to_json(), "notes": list(damage.left_out())}
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


# The tables each command reads, whose files it checks before it answers (`check_damage`).
# The problems view (`view`, and `report` with html) checks the files it reads itself, when it
# reads them: orchestrator/report/view/plan.py.
REPORT_READS = ("settings", "scores", "executions", "runs", "repeat_checks")
SHOW_READS = ("settings", "generations", "executions")  # of the settings it shows only
COMPARE_READS = ("settings", "scores", "executions", "repeat_checks")
EEE_READS = ("settings", "scores", "executions", "runs")
MLFLOW_READS = ("settings", "scores", "executions", "generations", "runs")
