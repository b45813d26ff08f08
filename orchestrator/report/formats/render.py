"""Rendering a built report as Markdown, CSV, LaTeX, JSON and one self-contained HTML file.

No metric is computed here: values come from tables/build.py as they are, and are only
formatted (display.py says how; html.py writes the page, tex.py the LaTeX snippets and the
standalone document). The
answers table opens every format; CSV and JSON keep every column at full precision, and every
CSV has its header even when the table has no rows.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd

from orchestrator.report.formats import plots
from orchestrator.report.formats.catalogue import display_of, header, shown_columns, title
from orchestrator.report.formats.display import (
    Part,
    TableParts,
    description,
    notes_after,
    sentence_list,
)
from orchestrator.report.formats.html import render_html
from orchestrator.report.formats.tex import render_tex, snippets
from orchestrator.report.tables import wording
from orchestrator.report.tables.damaged import LEFT_OUT_HEADING

if TYPE_CHECKING:
    from orchestrator.report.tables.data import ReportData, ReportTable

logger = logging.getLogger(__name__)

# figure -> (file name, caption, the table whose section shows it, after the table)
FIGURES = {
    "literature": (
        "literature.png",
        "Reported values (labelled with value and source) against the measured settings",
        "answers",
    ),
    "effects": ("effects.png", "Effect of each setting against the baseline", "effects"),
}


def _md_columns(frame: pd.DataFrame, table: ReportTable) -> list[str]:
    details = [c for c in display_of(table.name).details if c in frame.columns]
    return shown_columns(frame, table.name, table.group_by, table.frame) + details


def _md_table(table: ReportTable, part: Part) -> str:
    frame = part.frame
    if frame.empty:
        return f"_{table.empty_reason or '(none)'}_"
    cols = _md_columns(frame, table)
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = [
        "| " + " | ".join(header(table.name, c) for c in cols) + " |",
        "|" + "---|" * len(cols),
    ]
    columns = [part.texts(table.name, c) for c in cols]
    for cells in zip(*columns, strict=True):
        lines.append("| " + " | ".join(esc(text) for text in cells) + " |")
    return "\n".join(lines)


def _figures_of(table: str, images: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(caption, image) of the figures shown in `table`'s section."""
    return [(f[1], images[n]) for n, f in FIGURES.items() if f[2] == table and n in images]


def render_markdown(
    data: ReportData, images: Mapping[str, str], parts: TableParts | None = None
) -> str:
    """`images`: figure name -> file name next to report.md; `parts`: the tables' parts, when
    another format has them."""
    parts = parts or TableParts()
    out = [f"# reprogrid report\n\nStore: `{data.store}` · generated {data.generated_at}\n"]
    if data.left_out:  # before any number: what the answers do not hold, and why
        out += [f"**{LEFT_OUT_HEADING}**\n", *(f"- {line}" for line in data.left_out), ""]
    for table in data.tables:
        out.append(f"\n## {title(table.name)}\n\n{description(data, table.name)}\n")
        sentences = sentence_list(table.name, table.frame)
        if sentences is not None:
            out += [f"- {s}" for s in sentences] or [f"_{table.empty_reason or '(none)'}_"]
        for part in parts(table) if sentences is None else []:
            if part.group is not None:
                out.append(f"\n### {part.group}\n")
            out.append(_md_table(table, part))
        for caption, file in _figures_of(table.name, images):
            out.append(f"\n![{caption}]({file})\n")
        if table.name == notes_after(data) and data.notes:
            out.append("\n## Notes\n")
            out += [f"- {note}" for note in data.notes]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# JSON and CSV


def _json_value(value: Any) -> Any:
    """JSON-native form at full precision: NaN -> null, timestamps -> ISO text."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        value = value.item()  # numpy scalars
    if value is None or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (pd.Timestamp, datetime)):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _json_column(column: pd.Series) -> list[Any]:
    """`_json_value` of each value of `column` (a NumPy number column's values are already
    Python numbers once listed: only a float's NaN needs turning into None)."""
    values = column.tolist()
    kind = column.dtype.kind if isinstance(column.dtype, np.dtype) else "O"
    if kind == "f":
        return [None if v != v else v for v in values]
    if kind in "iub":
        return values
    return [_json_value(v) for v in values]


def _json_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    cols = [c for c in frame.columns if c != "exact"]
    columns = [_json_column(frame[c]) for c in cols]
    return [dict(zip(cols, row, strict=True)) for row in zip(*columns, strict=True)]


def render_json(data: ReportData) -> str:
    doc = {
        "store": data.store,
        "generated_at": data.generated_at,
        "options": data.options,
        "notes": list(data.notes),
        "left_out": list(data.left_out),
        "tables": {
            t.name: {
                "title": title(t.name),
                "description": description(data, t.name),
                "empty_reason": t.empty_reason if t.frame.empty else "",
                "rows": _json_rows(t.frame),
            }
            for t in data.tables
        },
    }
    return json_text(doc)


def json_text(doc: Any) -> str:
    """`doc` as indented JSON. orjson: the standard library indents in pure Python (`json`'s C
    encoder serves only `indent=None`), and report.json holds a row per setting and comparison.
    The values `json.dumps(doc, indent=2, default=str)` writes (tested), except that non-ASCII
    text is UTF-8, floats take their shortest form (1e-5) and an infinity is null (standard
    JSON has none: `json` wrote `Infinity`, which JSON.parse and jq refuse)."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2, default=str).decode() + "\n"


def write_csvs(data: ReportData, out_dir: Path) -> list[Path]:
    """One CSV per table, every column, the header even without rows."""
    paths = []
    for t in data.tables:
        path = out_dir / f"{t.name}.csv"
        t.frame[[c for c in t.frame.columns if c != "exact"]].to_csv(path, index=False)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------
# Writing


def figures(data: ReportData) -> dict[str, bytes]:
    metric = wording.metric_label(data.cards)
    makers: dict[str, Callable[[], bytes | None]] = {
        "literature": lambda: plots.literature_figure(data.literature_figure, metric),
        "effects": lambda: plots.effects_figure(data.effect_pairs, metric),
    }
    return {name: png for name, make in makers.items() if (png := make()) is not None}


def write_report(
    data: ReportData,
    out_dir: str | Path,
    formats: Sequence[str],
    setting_link: Callable[[str], str | None] | None = None,
) -> list[Path]:
    """Write the requested formats (and the figures as PNG) into `out_dir`; returns the paths.
    `setting_link`: where the HTML page links each setting key (the problems view)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    images = figures(data)
    written = []
    for name, png in images.items():
        path = out / FIGURES[name][0]
        path.write_bytes(png)
        written.append(path)
    names = {name: FIGURES[name][0] for name in images}
    embedded = {name: (FIGURES[name][2], FIGURES[name][1], png) for name, png in images.items()}
    parts = TableParts()  # md and html show the same parts
    writers: dict[str, Callable[[], list[Path]]] = {
        "md": lambda: [_write(out / "report.md", render_markdown(data, names, parts))],
        "tex": lambda: write_tex(data, out, names),
        "json": lambda: [_write(out / "report.json", render_json(data))],
        "html": lambda: [
            _write(out / "report.html", render_html(data, embedded, setting_link, parts))
        ],
        "csv": lambda: write_csvs(data, out),
    }
    for fmt in formats:
        written += writers[fmt]()
    logger.info("report: wrote %d file(s) to %s", len(written), out)
    return written


def write_tex(data: ReportData, out_dir: Path, images: Mapping[str, str]) -> list[Path]:
    """The LaTeX snippets (tex/<file>.tex) and report.tex, which inputs them and shows the
    figures (`images`: figure name -> file name next to report.tex)."""
    by_table: dict[str, list[tuple[str, str]]] = {}
    for name, file in images.items():
        _, caption, table = FIGURES[name]
        by_table.setdefault(table, []).append((caption, file))
    paths = []
    for relative, text in snippets(data).items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        paths.append(_write(path, text))
    return [_write(out_dir / "report.tex", render_tex(data, by_table)), *paths]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
