"""The report as one self-contained HTML page: inline CSS, figures as base64 data URIs, no
external resource.

Made to be read at a glance on a laptop screen (1400 px): the answers table opens the page,
the findings (one sentence per axis, each from its test) and the notes follow it, text cells
wrap (numbers never do) and column names break after their underscores, so every table fits the
width; long texts (library versions, setting notes, the settings that reproduce a value) sit in
a detail row under their row; a table longer than FOLD_ROWS rows folds into <details>; an empty
section says why it is empty; a pivot cell's interval shows on hover.
"""

from __future__ import annotations

import base64
import functools
import html
import numbers
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from orchestrator.report.formats.catalogue import display_of, header, shown_columns, title
from orchestrator.report.formats.display import (
    Part,
    TableParts,
    description,
    is_missing,
    notes_after,
    sentence_list,
)
from orchestrator.report.tables.damaged import LEFT_OUT_HEADING

if TYPE_CHECKING:
    from orchestrator.report.tables.data import ReportData, ReportTable

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:16px 24px;color:#222}
h1{font-size:1.4em;margin:0 0 2px}.meta{color:#555;margin:0 0 6px;font-size:13px}
nav{font-size:12px;line-height:1.7}nav a{margin-right:10px}
h2{font-size:1.15em;border-bottom:1px solid #ccc;padding-bottom:3px;margin:1.4em 0 .3em}
h3{font-size:1em;margin:.8em 0 .2em}.desc{color:#555;max-width:80em;font-size:13px;margin:.2em 0}
table{border-collapse:collapse;font-size:12px;margin:6px 0;max-width:100%}
th,td{border:1px solid #ddd;padding:2px 5px;text-align:left;vertical-align:top;
overflow-wrap:break-word}
th{background:#f0f3f7;position:sticky;top:0;font-weight:600}
tr.odd td{background:#fafafa}td.num{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap;overflow-wrap:normal}td[title]{cursor:help;text-decoration:underline dotted #999}
tr.detail td{color:#555;font-size:11px;border-top:none;background:#fff}
tr.detail b{font-weight:600;color:#333}img{max-width:100%;border:1px solid #eee}
.empty{color:#666;font-style:italic}.notes{font-size:13px;color:#333;margin:.4em 0}
.left-out{font-size:13px;border:2px solid #b00;padding:4px 8px;margin:6px 0}
details>summary{cursor:pointer;color:#245;font-size:13px;margin:4px 0}
ul.findings{font-size:13px;max-width:80em;margin:.3em 0;padding-left:1.4em}
ul.findings li{margin:.15em 0}
"""


def _is_number(value: Any) -> bool:
    kind = type(value)
    if kind is int or kind is str or value is None:  # most cells: no ABC check
        return kind is int
    if kind is float:
        return value == value
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not is_missing(value)


_BREAK_AFTER = re.compile(r"([_/:,;=])")
_PLAIN = re.compile(r"[^_/:,;=&<>\"']*")  # text that neither breaks nor needs escaping


@functools.lru_cache(maxsize=65_536)  # a report's cells repeat their names and settings
def breakable(text: str) -> str:
    """Escaped text where a line may break after `_ / : , ; =`, so a long name, path or
    source id never widens its column past what its words need."""
    if _PLAIN.fullmatch(text):
        return text
    return "".join(
        html.escape(part) + ("<wbr>" if _BREAK_AFTER.fullmatch(part) else "")
        for part in _BREAK_AFTER.split(text)
    )


def _head(name: str, column: str) -> str:
    return breakable(header(name, column))


def _details(name: str, row: Mapping[str, Any], width: int) -> str:
    parts = [
        f"<b>{html.escape(header(name, c))}</b>: {html.escape(str(row[c]))}"
        for c in display_of(name).details
        if c in row and not is_missing(row[c]) and str(row[c]) != ""
    ]
    if not parts:
        return ""
    return f'<tr class="detail"><td colspan="{width}">{" · ".join(parts)}</td></tr>'


def _hover(hover: pd.DataFrame | None, index: Any, column: str) -> str:
    if hover is None or column not in hover.columns or index not in hover.index:
        return ""
    text = hover.at[index, column]
    return "" if is_missing(text) or not text else f' title="{html.escape(str(text))}"'


SettingLink = Callable[[str], str | None]  # a setting key -> the page that shows it (or None)


def _cell(shown: str, column: str, record: Mapping[str, Any], link: SettingLink | None) -> str:
    """A cell's html from its text as shown (`Part.texts`)."""
    text = breakable(shown)
    key = record.get(column) if column == "setting_key" else None
    href = link(str(key)) if link is not None and isinstance(key, str) and key else None
    return f'<a href="{html.escape(href)}">{text}</a>' if href else text


def html_table(
    table: ReportTable,
    part: Part,
    group_by: str | None,
    setting_link: SettingLink | None = None,
) -> str:
    """One (sub-)table, folded when long; the empty reason when it has no rows. A setting key
    links to `setting_link(key)` (its column in the problems view) where that gives a page."""
    name, frame = table.name, part.frame
    if frame.empty:
        return f'<p class="empty">{html.escape(table.empty_reason or "(none)")}</p>'
    cols = shown_columns(frame, name, group_by, table.frame)
    head = "".join(f"<th>{_head(name, c)}</th>" for c in cols)
    body = []
    texts = [part.texts(name, c) for c in cols]
    for i, (index, record) in enumerate(zip(frame.index, part.rows, strict=True)):
        cells = []
        for c, shown in zip(cols, texts, strict=True):
            cls = ' class="num"' if _is_number(record.get(c)) else ""
            tip = _hover(table.hover, index, c) if table.hover is not None else ""
            cells.append(f"<td{cls}{tip}>{_cell(shown[i], c, record, setting_link)}</td>")
        parity = ' class="odd"' if i % 2 else ""
        body.append(f"<tr{parity}>{''.join(cells)}</tr>" + _details(name, record, len(cols)))
    out = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    fold = display_of(name).fold_rows
    if fold is not None and len(frame) > fold:
        out = f"<details><summary>{len(frame)} rows (show)</summary>{out}</details>"
    return out


def _section(
    data: ReportData,
    table: ReportTable,
    images: Mapping[str, bytes],
    setting_link: SettingLink | None,
    table_parts: TableParts,
) -> list[str]:
    esc = html.escape
    parts = [
        f'<h2 id="{table.name}">{esc(title(table.name))}</h2>',
        f'<p class="desc">{esc(description(data, table.name))}</p>',
    ]
    sentences = sentence_list(table.name, table.frame)
    if sentences:
        items = "".join(f"<li>{esc(s)}</li>" for s in sentences)
        parts.append(f'<ul class="findings">{items}</ul>')
    elif sentences is not None:
        parts.append(f'<p class="empty">{esc(table.empty_reason or "(none)")}</p>')
    for part in table_parts(table) if sentences is None else []:
        if part.group is not None:
            parts.append(f"<h3>{esc(part.group)}</h3>")
        parts.append(html_table(table, part, table.group_by, setting_link))
    for caption, png in images.items():
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        parts.append(f'<figure><img alt="{esc(caption)}" src="{uri}"></figure>')
    return parts


def render_html(
    data: ReportData,
    images: Mapping[str, tuple[str, str, bytes]],
    setting_link: SettingLink | None = None,
    table_parts: TableParts | None = None,
) -> str:
    """`images`: figure name -> (table whose section shows it, caption, PNG bytes);
    `setting_link`: where a setting key links to (None: keys are plain text); `table_parts`:
    the tables' parts, when another format has them."""
    esc = html.escape
    table_parts = table_parts or TableParts()
    nav = " ".join(f'<a href="#{t.name}">{esc(title(t.name))}</a>' for t in data.tables)
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>reprogrid report</title><style>{CSS}</style></head><body>",
        f'<h1>reprogrid report</h1><p class="meta">Store: <code>{esc(data.store)}</code> · '
        f"generated {esc(data.generated_at)}</p><nav>{nav}</nav>",
    ]
    if data.left_out:  # before any number: what the answers do not hold, and why
        lines = "".join(f"<li>{esc(line)}</li>" for line in data.left_out)
        parts.append(f'<div class="left-out"><b>{esc(LEFT_OUT_HEADING)}</b><ul>{lines}</ul></div>')
    for table in data.tables:
        mine = {cap: png for sec, cap, png in images.values() if sec == table.name}
        parts += _section(data, table, mine, setting_link, table_parts)
        if table.name == notes_after(data) and data.notes:
            # right after the answers and their findings: what to know before quoting them
            notes = "".join(f"<li>{esc(n)}</li>" for n in data.notes)
            parts.append(f'<h2 id="notes">Notes</h2><ul class="notes">{notes}</ul>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
