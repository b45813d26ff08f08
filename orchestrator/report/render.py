"""Rendering a built report as Markdown, CSV, LaTeX, JSON and one self-contained HTML file.

No metric is computed here: values come from orchestrator.report.build as they are, and are only
formatted. Columns ending in `_pct` (percent) or `_pp` (percentage points) are shown with two
decimals in md/tex/html; CSV and JSON keep full precision. Setting keys are shortened to 12
characters in md/tex/html (CSV and JSON keep them whole).
"""

from __future__ import annotations

import base64
import html
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from orchestrator.report import plots

if TYPE_CHECKING:
    from orchestrator.report.data import ReportData

logger = logging.getLogger(__name__)

FORMATS = ("md", "csv", "tex", "html", "json")
# name -> (title, description); the order of the report's sections.
TABLES: dict[str, tuple[str, str]] = {
    "grid": ("Scores per model and setting",
             "score_pct: the setting's headline metric in percent; for pass@1 the unbiased "
             "estimate, mean over problems, recomputed from the executions table, with its "
             "bootstrap interval over problems (ci_low_pct, ci_high_pct); and the number of "
             "samples whose prompt was truncated, that hit the length limit, or whose harness "
             "slice was misaligned."),
    "length_limits": ("Prompt truncation and length-limit hits",
                      "Settings with at least one truncated prompt, length-limit hit or decode "
                      "mismatch (counts of samples)."),
    "literature": ("Reported values against the measured settings",
                   "Each reported value of a model the store holds: whether some "
                   "k/(164 x samples) gives it (with the samples per problem its source states, "
                   "else one), the settings that reproduce it (pass@1 rounds [round] or "
                   "truncates [floor] to it at the printed decimals), settings within one "
                   "problem (near), the closest setting and its gap (setting minus reported, "
                   "percentage points), tuning confusion (only the other tuning's model "
                   "reproduces it), and pilot settings (a subset of the problems), which are "
                   "listed but never compared."),
    "literature_unmatched": ("Literature rows without measured settings",
                             "Rows whose model name the mapping does not list (unmapped) or "
                             "whose model the store has not run (not in store)."),
    "unobtainable": ("Reported values that no k/(164 x samples) gives",
                     "With 164 problems and m samples per problem a pass@1 is k/(164 m); no k "
                     "gives these printed values by rounding or flooring. Where the source does "
                     "not say how it sampled, m = 1 is assumed and the row says \"not "
                     "obtainable with one sample per problem\": the value may come from "
                     "several samples."),
    "effects": ("Effect of each setting against the baseline",
                "Pairs of settings of one model that differ only in one axis: mean change "
                "(percentage points, signed), mean relative change (percent of the baseline "
                "score) and mean magnitude, over all models and over instruct models only."),
    "effect_pairs": ("Effect pairs per model",
                     "Each baseline setting and a setting that changes one axis."),
    "precision_spread": ("Spread across precision and quantization, per decoding",
                         "Population standard deviation (percentage points) across the "
                         "precision settings of one model with every other axis fixed: mean and "
                         "largest per decoding."),
    "precision_spread_by_model": ("Spread across precision and quantization, per model",
                                  "Each group of settings that differ only in precision."),
    "skipped_failed": ("Skipped and failed settings",
                       "Settings planned out with a reason (skipped) or that failed (the error)."),
    "provenance_settings": ("Provenance of the measured settings",
                            "Model revision, backend and version, device, effective dtype, "
                            "tokenizer and data hashes, host and library versions, with the "
                            "number of settings sharing them."),
    "provenance_runs": ("Runs that wrote the store", "The runs table: one row per command."),
}  # fmt: skip
# Columns left out of md/tex/html (kept in CSV and JSON), per table ("*": every table).
HIDDEN = {
    "*": {"reproduced_by_keys", "closest_key", "exact"},
    "grid": {"benchmark", "length_semantics", "limit", "model_family", "model_size_b",
             "variant", "model_tuning"},
    "literature": {"location", "line"},
}  # fmt: skip
COLLAPSED = {"literature_unmatched", "effect_pairs"}  # html: inside <details>
# figure -> (file name, caption, the table whose section shows it)
FIGURES = {
    "literature": ("literature.png", "Reported values against the range of measured scores",
                   "literature"),
    "effects": ("effects.png", "Effect of each setting against the baseline", "effects"),
}  # fmt: skip
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:1.6em}
h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:2em}
h3{font-size:1.05em}.desc{color:#555;max-width:70em}.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f3f7;position:sticky;top:0}tr:nth-child(even) td{background:#fafafa}
td.num{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%;border:1px solid #eee}
.empty{color:#888;font-style:italic}nav a{margin-right:12px}
"""


def format_cell(column: str, value: Any) -> str:
    """Display text of one value (md/tex/html)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if column.endswith(("_pct", "_pp")) and isinstance(value, (int, float)):
        return f"{value:.2f}"
    if column.endswith("_key") and isinstance(value, str):
        return value[:12]
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    if isinstance(value, pd.Timestamp):
        return value.isoformat(timespec="seconds")
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _shown(frame: pd.DataFrame, name: str) -> list[str]:
    hidden = HIDDEN["*"] | HIDDEN.get(name, set())
    return [c for c in frame.columns if c not in hidden]


def _figures_of(table: str, images: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """(figure name, caption, image) of the figures shown in `table`'s section."""
    return [(n, f[1], images[n]) for n, f in FIGURES.items() if f[2] == table and n in images]


def _groups(data: ReportData, name: str) -> Iterable[tuple[str | None, pd.DataFrame]]:
    table = next(t for t in data.tables if t.name == name)
    frame, by = table.frame, table.group_by
    if by is None or frame.empty:
        yield None, frame
        return
    for value, part in frame.groupby(by, sort=False):
        yield str(value), part.drop(columns=[by])


def _title(name: str) -> tuple[str, str]:
    return TABLES.get(name, (name, ""))


def _description(data: ReportData, name: str) -> str:
    text = _title(name)[1]
    if name == "effects":
        base = ", ".join(f"{k}={v}" for k, v in data.options["baseline"].items())
        text = f"Baseline: {base}. {text}"
    if name == "grid":
        o = data.options
        text += (f" Intervals: {o['confidence']:.0%} percentile bootstrap over problems, "
                 f"{o['n_resamples']} resamples, seed {o['seed']}.")  # fmt: skip
    return text


# ---------------------------------------------------------------------------------------------
# Markdown


def _md_table(frame: pd.DataFrame, name: str) -> str:
    if frame.empty:
        return "_(none)_"
    cols = _shown(frame, name)
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame[cols].itertuples(index=False):
        lines.append(
            "| " + " | ".join(esc(format_cell(c, v)) for c, v in zip(cols, row, strict=True)) + " |"
        )
    return "\n".join(lines)


def render_markdown(data: ReportData, images: Mapping[str, str]) -> str:
    """`images`: figure name -> file name next to report.md."""
    out = [f"# reprogrid report\n\nStore: `{data.store}` · generated {data.generated_at}\n"]
    out += [f"- {note}" for note in data.notes]
    for table in data.tables:
        out.append(f"\n## {_title(table.name)[0]}\n\n{_description(data, table.name)}\n")
        for _, caption, file in _figures_of(table.name, images):
            out.append(f"![{caption}]({file})\n")
        for group, frame in _groups(data, table.name):
            if group is not None:
                out.append(f"\n### {group}\n")
            out.append(_md_table(frame, table.name))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# LaTeX

_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}  # fmt: skip


def tex_escape(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)


def _tex_table(frame: pd.DataFrame, name: str) -> str:
    if frame.empty:
        return r"\emph{(none)}" + "\n"
    cols = _shown(frame, name)
    lines = [r"\begin{longtable}{" + "l" * len(cols) + "}", r"\toprule",
             " & ".join(tex_escape(c) for c in cols) + r" \\",
             r"\midrule", r"\endhead"]  # fmt: skip
    for row in frame[cols].itertuples(index=False):
        cells = [tex_escape(format_cell(c, v)) for c, v in zip(cols, row, strict=True)]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{longtable}"]
    return "\n".join(lines) + "\n"


def render_tex(data: ReportData, images: Mapping[str, str]) -> str:
    out = [
        r"\documentclass{article}",
        r"\usepackage[landscape,margin=1cm]{geometry}",
        r"\usepackage{booktabs,longtable,graphicx}",
        r"\begin{document}",
        r"\scriptsize",
        r"\section*{reprogrid report}",
        tex_escape(f"Store: {data.store}, {data.generated_at}"),
    ]
    out += [r"\par " + tex_escape(n) for n in data.notes]  # fmt: skip
    for table in data.tables:
        out.append(r"\subsection*{" + tex_escape(_title(table.name)[0]) + "}")
        out.append(tex_escape(_description(data, table.name)))
        for _, caption, file in _figures_of(table.name, images):
            out.append(r"\begin{figure}[h]\centering\includegraphics[width=0.9\linewidth]{"
                       + file + r"}\caption{" + tex_escape(caption) + r"}\end{figure}")  # fmt: skip
        for group, frame in _groups(data, table.name):
            if group is not None:
                out.append(r"\subsubsection*{" + tex_escape(group) + "}")
            out.append(_tex_table(frame, table.name))
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# JSON and CSV


def _json_value(value: Any) -> Any:
    """JSON-native form at full precision: NaN -> null, timestamps -> ISO text."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        value = value.item()  # numpy scalars
    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (pd.Timestamp, datetime)):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _json_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    cols = [c for c in frame.columns if c != "exact"]
    return [
        {c: _json_value(v) for c, v in zip(cols, row, strict=True)}
        for row in frame[cols].itertuples(index=False)
    ]


def render_json(data: ReportData) -> str:
    doc = {
        "store": data.store,
        "generated_at": data.generated_at,
        "options": data.options,
        "notes": list(data.notes),
        "tables": {
            t.name: {
                "title": _title(t.name)[0],
                "description": _description(data, t.name),
                "rows": _json_rows(t.frame),
            }
            for t in data.tables
        },  # fmt: skip
    }
    return json.dumps(doc, indent=2, default=str) + "\n"


def write_csvs(data: ReportData, out_dir: Path) -> list[Path]:
    paths = []
    for t in data.tables:
        path = out_dir / f"{t.name}.csv"
        t.frame[[c for c in t.frame.columns if c != "exact"]].to_csv(path, index=False)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------
# HTML


def _html_table(frame: pd.DataFrame, name: str) -> str:
    if frame.empty:
        return '<p class="empty">(none)</p>'
    cols = _shown(frame, name)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for row in frame[cols].itertuples(index=False):
        cells = []
        for c, v in zip(cols, row, strict=True):
            cls = ' class="num"' if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
            cells.append(f"<td{cls}>{html.escape(format_cell(c, v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def render_html(data: ReportData, images: Mapping[str, bytes]) -> str:
    """One self-contained page: inline CSS, figures as base64 data URIs, no external links."""
    esc = html.escape
    nav = " ".join(f'<a href="#{t.name}">{esc(_title(t.name)[0])}</a>' for t in data.tables)
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>reprogrid report</title><style>{CSS}</style></head><body>",
        f"<h1>reprogrid report</h1><p>Store: <code>{esc(data.store)}</code> · generated "
        f"{esc(data.generated_at)}</p><nav>{nav}</nav>",
    ]
    if data.notes:
        parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in data.notes) + "</ul>")
    for table in data.tables:
        parts.append(f'<h2 id="{table.name}">{esc(_title(table.name)[0])}</h2>')
        parts.append(f'<p class="desc">{esc(_description(data, table.name))}</p>')
        for _, caption, png in _figures_of(table.name, images):
            uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            parts.append(f'<figure><img alt="{esc(caption)}" src="{uri}"></figure>')
        for group, frame in _groups(data, table.name):
            if group is not None:
                parts.append(f"<h3>{esc(group)}</h3>")
            body = _html_table(frame, table.name)
            if table.name in COLLAPSED and not frame.empty:
                body = f"<details><summary>{len(frame)} rows</summary>{body}</details>"
            parts.append(body)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------------------------
# Writing


def parse_formats(text: str | Sequence[str]) -> list[str]:
    items = text.split(",") if isinstance(text, str) else [f for t in text for f in t.split(",")]
    formats = [f.strip() for f in items if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(f"Unknown report format(s) {', '.join(bad) or '(none)'}. "
                         f"Valid: {', '.join(FORMATS)}")  # fmt: skip
    return formats


def figures(data: ReportData) -> dict[str, bytes]:
    makers: dict[str, Callable[[], bytes | None]] = {
        "literature": lambda: plots.literature_figure(data.literature_figure),
        "effects": lambda: plots.effects_figure(data.effect_pairs),
    }
    return {name: png for name, make in makers.items() if (png := make()) is not None}


def write_report(data: ReportData, out_dir: str | Path, formats: Sequence[str]) -> list[Path]:
    """Write the requested formats (and the figures as PNG) into `out_dir`; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    images = figures(data)
    written = []
    for name, png in images.items():
        path = out / FIGURES[name][0]
        path.write_bytes(png)
        written.append(path)
    names = {name: FIGURES[name][0] for name in images}
    writers: dict[str, Callable[[], list[Path]]] = {
        "md": lambda: [_write(out / "report.md", render_markdown(data, names))],
        "tex": lambda: [_write(out / "report.tex", render_tex(data, names))],
        "json": lambda: [_write(out / "report.json", render_json(data))],
        "html": lambda: [_write(out / "report.html", render_html(data, images))],
        "csv": lambda: write_csvs(data, out),
    }
    for fmt in formats:
        written += writers[fmt]()
    logger.info("report: wrote %d file(s) to %s", len(written), out)
    return written


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
