"""The harness's prompt slicing, where users look (docs/report.md, "Decode mismatch").

The harness decodes a sample's prompt and output ids together and keeps the text after
len(prompt) characters. When the decoded text does not start with the prompt, that cut lands in
the wrong place: SmolLM2's tokenizer uses `<|im_start|>` as its BOS id, the harness drops a
leading BOS id before decoding, and the ChatML prompt loses its first 12 characters, so 12
characters of every continuation are cut off. reprogrid reproduces the cut and flags it per
sample (`decode_mismatch`) and per setting (`n_decode_mismatch`); this module words the flags
for the report's notes and `show`, and after a run names the commands that look at the store,
with a `show` of one sample the cut hit.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from storage.store import Store

if TYPE_CHECKING:  # the report's frame; `show` and `run` import this module without pandas
    import pandas as pd

DOCS = "docs/report.md#decode-mismatch"
SAMPLE_NOTE = (
    "decode mismatch: the harness's prompt slicing cut this continuation in the wrong place "
    f"(the decoded text does not start with the prompt; see {DOCS})"
)
# A note per setting, up to this many; a grid of hundreds of such settings gets one more line.
MAX_SETTING_NOTES = 10
LABEL = ("model_name", "template", "decoding", "max_length", "precision", "backend")
COUNTS = ("n_decode_mismatch", "n_problems", "n_samples")


@dataclass(frozen=True)
class CutSample:
    """One stored sample the harness's slicing cut in the wrong place."""

    setting_key: str
    task_id: str
    sample_index: int


def mismatch_notes(grid: pd.DataFrame) -> list[str]:
    """The report's notes: per scored setting (a row of the report's grid) whose samples the
    harness's slicing cut in the wrong place, how many of its samples, in the grid's order."""
    if grid.empty:
        return []
    hit = grid.loc[grid["n_decode_mismatch"].fillna(0) > 0, [*LABEL, *COUNTS, "setting_key"]]
    notes = []
    for row in hit.head(MAX_SETTING_NOTES).to_dict("records"):
        total = int(row["n_problems"]) * int(row["n_samples"])
        label = " ".join(str(row[a]) for a in LABEL)
        notes.append(
            f"{label} ({str(row['setting_key'])[:12]}): {int(row['n_decode_mismatch'])}/{total} "
            "samples lost characters to the harness's prompt slicing (decode mismatch: the "
            f"decoded text does not start with the prompt), see {DOCS}"
        )
    if len(hit) > MAX_SETTING_NOTES:
        notes.append(
            f"{len(hit) - MAX_SETTING_NOTES} more setting(s) with decode mismatches: the "
            f"`length_limits` table lists them all, see {DOCS}"
        )
    return notes


def first_cut_sample(store: Store, keys: Sequence[str]) -> CutSample | None:
    """The first sample (in the order of `keys`, then the store's) flagged `decode_mismatch`
    among the settings `keys`, or None. Reads the flag column of one setting at a time, and
    only until one is found."""
    for key in keys:
        data = store.read_table(
            "generations", [key], columns=["task_id", "sample_index", "decode_mismatch"]
        )
        if not data.num_rows:
            continue
        cut = data.filter(data["decode_mismatch"])  # a null flag (not set) is dropped
        if cut.num_rows:
            row = cut.slice(0, 1).to_pylist()[0]
            return CutSample(key, str(row["task_id"]), int(row["sample_index"]))
    return None


def next_commands(
    store_uri: str, report_dir: str, view_dir: str, cut: CutSample | None
) -> list[str]:
    """What a user runs on the store after a run, one line each with what it gives: the
    report, the problems view, and `show` of a sample the harness's slicing cut (when one is
    stored)."""
    store = shlex.quote(store_uri)
    report, view = f"reprogrid report --store {store}", f"reprogrid view --store {store}"
    width = max(len(report), len(view))
    lines = [
        f"{report.ljust(width)}  # the report, written to {report_dir}",
        f"{view.ljust(width)}  # every problem and sample in the browser: {view_dir}",
    ]
    if cut is not None:
        sample = f" --sample {cut.sample_index}" if cut.sample_index else ""
        lines.append(
            f"reprogrid show --store {store} --setting {cut.setting_key[:12]} --problem "
            f"{shlex.quote(cut.task_id)}{sample}  # a sample the harness's prompt slicing cut "
            f"(decode mismatch, {DOCS})"
        )
    return lines
