"""The report as LaTeX a paper can paste: one booktabs snippet per table of TEX_TABLES
(`tex/<file>.tex`, a `tabular` to `\\input`; a `longtable` for the appendix of every setting),
and `report.tex`, a standalone document that inputs them, with the figures and the notes.

Every text goes through texescape.tex_escape, so the files are plain ASCII and a snippet needs
only `booktabs` and `array` (and `longtable` for a long one). What a cell shows is what md and
html show (orchestrator.report.formats.display): two decimals, 12-character keys, a score with its
interval (set smaller after it); text cells longer than WRAP_CHARS wrap in a column of
WRAP_WIDTH; long texts (display.details) go on a row of their own under their row, as in the
html page. A table split by model (answers, scores, the grid) is one tabular with a heading row
per model.

The tables, their columns and the words around them are in orchestrator.report.formats.textables
(TEX_TABLES: adding a table is one entry there).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.report.formats.catalogue import display_of, header, shown_columns, title
from orchestrator.report.formats.display import (
    INTERVAL_TABLES,
    format_cell,
    interval_note,
    is_missing,
    notes_after,
    phrases,
    sentence_list,
    value_and_interval,
)
from orchestrator.report.formats.texescape import tex_escape
from orchestrator.report.formats.textables import TEX_TABLES, TexTable
from orchestrator.report.tables import wording
from orchestrator.report.tables.records import records

if TYPE_CHECKING:
    from orchestrator.report.tables.data import ReportData, ReportTable

SNIPPET_DIR = "tex"  # the snippets' folder, next to report.tex
PACKAGES = ("booktabs", "array")  # what every snippet needs (\usepackage)
LONG_PACKAGES = ("longtable",)  # what a long snippet needs as well
WRAP_CHARS = 30  # a text column with a longer cell wraps ...
WRAP_WIDTH = "10em"  # ... in a ragged-right column this wide
KEY_SUFFIXES = ("_key", "_keys", "_sha256")  # set in typewriter type
# The width a detail row's paragraph wraps at: the line less the indent, unless the document
# says otherwise (report.tex: the table's own width, measured first).
NOTE_WIDTH = r"\reprogridnotewidth"
NOTE_DEFAULT = r"\providecommand{\reprogridnotewidth}{\dimexpr\linewidth-1em\relax}"


# ---------------------------------------------------------------------------------------------
# One snippet


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _columns(entry: TexTable, table: ReportTable) -> list[str]:
    frame = table.frame
    present = frame.loc[:, frame.notna().any(axis=0)] if len(frame) else frame
    if entry.columns is not None:
        return [c for c in entry.columns if c in present.columns]
    return shown_columns(present, table.name, table.group_by, table.frame)


def _spec(entry: TexTable, table: ReportTable, column: str) -> str:
    frame = table.frame
    values = [v for v in frame[column] if not is_missing(v)] if column in frame else []
    if values and all(_is_number(v) for v in values):
        return "r"
    texts = [value_and_interval(table.name, column, {column: v})[0] for v in values]
    width = entry.wrap.get(column) or (
        WRAP_WIDTH if any(len(t) > WRAP_CHARS for t in texts) else None
    )
    return r">{\raggedright\arraybackslash}p{" + width + "}" if width else "l"


def _value(column: str, text: str, number: bool) -> str:
    if number and text.startswith("-"):
        return r"\ensuremath{-}" + tex_escape(text[1:])  # a minus sign, not a hyphen
    if column.endswith(KEY_SUFFIXES):
        return r"\texttt{" + tex_escape(text) + "}"
    # \slash: a line may break after it, so a source (doi:10.3390/software4030017) wraps
    return tex_escape(text).replace("/", r"\slash{}")


def _cell(table: ReportTable, column: str, index: Any, row: Mapping[str, Any]) -> str:
    text, interval = value_and_interval(table.name, column, row)
    if not text:
        return ""
    out = _value(column, text, _is_number(row.get(column)))
    intervals = table.intervals
    if intervals is not None and column in intervals.columns and index in intervals.index:
        extra = intervals.at[index, column]
        interval = "" if is_missing(extra) else str(extra)
    if interval:
        out += r"\,{\scriptsize " + tex_escape(interval) + "}"
    return out


def _detail_row(table: ReportTable, row: Mapping[str, Any], width: int) -> str:
    """The display's long texts of a row, on a row of their own (html: its detail row)."""
    parts = [
        tex_escape(f"{header(table.name, c)}: {row[c]}")
        for c in display_of(table.name).details
        if c in row and not is_missing(row[c]) and str(row[c]) != ""
    ]
    if not parts:
        return ""
    # A paragraph in a box of no width (\rlap): it wraps at NOTE_WIDTH instead of setting the
    # table's width (one long note used to widen the table, and the document's fit then shrank
    # every cell to about 55%).
    note = r"\raggedright\footnotesize " + "; ".join(parts)
    return (
        r"\multicolumn{"
        + str(width)
        + r"}{@{\hspace{1em}}l}{\rlap{\parbox[t]{"
        + NOTE_WIDTH
        + "}{"
        + note
        + r"}}} \\"
    )


def _has_details(table: ReportTable) -> bool:
    frame = table.frame
    details = [c for c in display_of(table.name).details if c in frame.columns]
    return bool(details) and bool(frame[details].notna().to_numpy().any())


def _heading_columns(entry: TexTable, table: ReportTable) -> tuple[str, ...]:
    if entry.heading:
        return tuple(c for c in entry.heading if c in table.frame.columns)
    return (table.group_by,) if table.group_by else ()


def _heading(entry: TexTable, table: ReportTable, row: Mapping[str, Any], width: int) -> str:
    """The heading row of the rows that share `row`'s heading values: the first in bold, the
    others with their headers in parentheses."""
    first, *others = _heading_columns(entry, table)
    text = r"\textbf{" + tex_escape(str(row.get(first))) + "}"
    extra = [
        f"{_header(entry, table, c, '')}: {tex_escape(format_cell(c, row.get(c)))}"
        for c in others
        if not is_missing(row.get(c))
    ]
    if extra:
        text += " (" + "; ".join(extra) + ")"
    return r"\multicolumn{" + str(width) + r"}{@{}l}{" + text + r"} \\"


def _body(entry: TexTable, table: ReportTable, cols: list[str]) -> list[str]:
    frame = table.frame
    width = len(cols)
    if frame.empty:
        reason = tex_escape(table.empty_reason or "(none)")
        return [r"\multicolumn{" + str(width) + r"}{@{}l}{\emph{" + reason + r"}} \\"]
    lines: list[str] = []
    heading = _heading_columns(entry, table)
    group = None
    for index, row in zip(frame.index, records(frame), strict=True):
        values = tuple(row.get(c) for c in heading)
        if heading and values != group:
            group = values
            if lines:
                lines.append(r"\midrule")
            lines.append(_heading(entry, table, row, width))
        lines.append(" & ".join(_cell(table, c, index, row) for c in cols) + r" \\")
        detail = _detail_row(table, row, width)
        if detail:
            lines.append(detail)
    return lines


def _header(entry: TexTable, table: ReportTable, column: str, metric: str) -> str:
    """`metric`: the headline's name a header may say ({metric}, report/wording.py)."""
    text = entry.headers.get(column) or header(table.name, column).replace("_", " ")
    return tex_escape(text.format(metric=metric))


def _table_of(entry: TexTable, data: ReportData) -> ReportTable:
    table = next((t for t in data.tables if t.name == entry.table), None)
    if table is None:
        names = ", ".join(t.name for t in data.tables)
        raise KeyError(f"LaTeX table {entry.file!r} shows {entry.table!r}; tables: {names}")
    return table


def snippet(entry: TexTable, data: ReportData) -> str:
    """The snippet of one TexTable: a booktabs tabular (longtable when `long`) of its table."""
    table = _table_of(entry, data)
    cols = _columns(entry, table) or list(table.frame.columns[:1])
    spec = "".join(_spec(entry, table, c) for c in cols) + "@{}"
    env = "longtable" if entry.long else "tabular"
    needs = ", ".join((*PACKAGES, *(LONG_PACKAGES if entry.long else ())))
    metric = wording.metric_label(data.cards)
    head = " & ".join(_header(entry, table, c, metric) for c in cols) + r" \\"
    lines = [
        f"% reprogrid report: {tex_escape(title(table.name))} (needs {needs})",
        *([NOTE_DEFAULT] if _has_details(table) else []),
        rf"\begin{{{env}}}{{@{{}}{spec}}}",
        r"\toprule",
        head,
        r"\midrule",
    ]
    if entry.long:  # the header again on every page
        lines += [r"\endhead", r"\bottomrule", r"\endfoot"]
    lines += _body(entry, table, cols)
    if not entry.long:
        lines.append(r"\bottomrule")
    lines.append(rf"\end{{{env}}}")
    return "\n".join(lines) + "\n"


def snippets(data: ReportData) -> dict[str, str]:
    """`tex/<file>.tex` -> its text, for every entry of TEX_TABLES."""
    return {f"{SNIPPET_DIR}/{e.file}.tex": snippet(e, data) for e in TEX_TABLES}


# ---------------------------------------------------------------------------------------------
# The standalone document

# A tabular is set twice: first to measure it (its notes take no width), then with its notes
# wrapping in its own width. One wider than the line or taller than the page is then scaled
# down to fit (a paper that \inputs a snippet decides this itself: \resizebox, \small, a
# table* float; its notes wrap in the line).
FIT = r"""\newsavebox{\reprogridbox}
\newcommand{\reprogridnotewidth}{\dimexpr\linewidth-1em\relax}
\newcommand{\reprogridfit}[1]{\sbox{\reprogridbox}{#1}%
  \edef\reprogridnotewidth{\the\dimexpr\wd\reprogridbox-1em\relax}%
  \sbox{\reprogridbox}{#1}%
  \ifdim\wd\reprogridbox>\linewidth
    \sbox{\reprogridbox}{\resizebox{\linewidth}{!}{\usebox{\reprogridbox}}}\fi
  \ifdim\dimexpr\ht\reprogridbox+\dp\reprogridbox\relax>0.85\textheight
    \sbox{\reprogridbox}{\resizebox*{!}{0.85\textheight}{\usebox{\reprogridbox}}}\fi
  \usebox{\reprogridbox}}"""


def _shown(entry: TexTable, table: ReportTable, path: str) -> list[str]:
    """What report.tex shows of a table: its snippet, fitted to the page; for an empty table,
    its reason, as a paragraph (a tabular of a header and one long line of reason was scaled
    down to fit, to about 4 pt); for a table of sentences none of whose rows holds a test,
    the sentences, as a list (as rows, each wrapped in the width of the empty columns)."""
    if table.frame.empty:
        return [r"\noindent\emph{" + tex_escape(table.empty_reason or "No rows.") + r"}\par"]
    if entry.tested_by is not None and table.frame[entry.tested_by].isna().all():
        sentences = sentence_list(table.name, table.frame) or []
        return [
            r"\begin{itemize}",
            *(r"\item " + tex_escape(t) for t in sentences),
            r"\end{itemize}",
        ]
    if entry.long:
        return [r"{\footnotesize\input{" + path + "}}"]
    return [r"\begin{center}\reprogridfit{\input{" + path + r"}}\end{center}"]


def _section(entry: TexTable, data: ReportData, figures: list[tuple[str, str]]) -> list[str]:
    text = entry.description.format(**phrases(data))
    if entry.table in INTERVAL_TABLES:
        text += " " + interval_note(data)
    path = f"{SNIPPET_DIR}/{entry.file}"
    out = [
        r"\subsection*{" + tex_escape(title(entry.table)) + "}",
        tex_escape(text),
        r"\par\medskip",
    ]
    out += _shown(entry, _table_of(entry, data), path)
    for caption, file in figures:
        out += [
            r"\begin{center}",
            r"\includegraphics[width=0.8\linewidth,height=0.7\textheight,keepaspectratio]{"
            + file
            + "}",
            r"\par\small " + tex_escape(caption),
            r"\end{center}",
        ]
    return out


def render_tex(data: ReportData, figures: Mapping[str, list[tuple[str, str]]]) -> str:
    """report.tex: every snippet of TEX_TABLES in order, the notes after the answers' findings,
    each figure after its table. `figures`: report table -> [(caption, PNG file name)]."""
    packages = ",".join((*PACKAGES, *LONG_PACKAGES, "graphicx"))
    out = [
        "% reprogrid report, standalone: pdflatex report.tex (the snippets are in "
        + SNIPPET_DIR
        + "/)",
        r"\documentclass{article}",
        r"\usepackage[landscape,margin=1.5cm]{geometry}",
        r"\usepackage{" + packages + "}",
        FIT,
        r"\renewcommand{\labelitemi}{\ensuremath{\bullet}}% \textbullet: a TS1 (bitmap) font",
        r"\begin{document}",
        r"\small",
        # the column gap of a dense table: 8pt, not 12pt, so the answers keep the text's size
        r"\setlength{\tabcolsep}{4pt}",
        r"\section*{reprogrid report}",
        r"Store: \texttt{"
        + tex_escape(data.store)
        + "}, generated "
        + tex_escape(data.generated_at),
    ]
    after = notes_after(data)
    for entry in TEX_TABLES:
        out += _section(entry, data, figures.get(entry.table, []))
        if entry.table == after and data.notes:
            out.append(r"\subsection*{Notes}")
            out.append(r"\begin{itemize}")
            out += [r"\item " + tex_escape(n) for n in data.notes]
            out.append(r"\end{itemize}")
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"
