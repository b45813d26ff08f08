"""The evidence in every format: each comparison shows its raw and adjusted p, its method, its
family's adjustment and size and its discordant counts (b, c) in md, html and tex as in the CSV;
the findings are written to findings.csv, report.json, report.md and report.html, and follow
the answers directly in md and html."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.cli import main
from orchestrator.report.formats.display import format_cell
from orchestrator.report.formats.texescape import tex_escape
from orchestrator.report.formats.textables import TEX_TABLES
from tests.fixtures_store import write_synthetic_store

# what each comparison must show in every format, as the CSV column it comes from
SHOWN = ("method", "b", "c", "p_value", "p_adjusted", "adjustment", "family_size")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("evidence")
    write_synthetic_store(str(root / "store"))
    out = root / "out"
    argv = ["report", "--store", str(root / "store"), "--out", str(out), "--resamples", "50"]
    assert main([*argv, "--format", "md,html,tex,csv,json"]) == 0
    return out


def _section(text: str, start: str, end: str) -> str:
    at = text.index(start)
    return text[at : text.index(end, at + len(start))]


def _md_rows(md: str) -> list[dict[str, str]]:
    section = _section(md, "## Every comparison", "\n## ")
    lines = [line for line in section.splitlines() if line.startswith("|")]
    split = lambda line: [c.strip() for c in line.strip("|").split(" | ")]  # noqa: E731
    head = split(lines[0])
    return [dict(zip(head, split(line), strict=True)) for line in lines[2:]]


def _html_text(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()


def _html_rows(page: str) -> list[dict[str, str]]:
    section = _section(page, '<h2 id="comparisons">', "<h2 ")
    head = [_html_text(h) for h in re.findall(r"<th>(.*?)</th>", section)]
    rows = re.findall(r"<tr(?: class=\"odd\")?>(<td.*?)</tr>", section)
    cells = [[_html_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in rows]
    return [dict(zip(head, row, strict=True)) for row in cells]


def _tex_rows(snippet: str) -> list[dict[str, str]]:
    """The data rows by column name (headers mapped back), each with its family's heading
    row's family, adjustment and family size."""
    names = {
        _tex_header(c): c
        for c in next(t for t in TEX_TABLES if t.file == "comparisons").columns or ()
    }
    lines = [line[: -len(r"\\")].strip() for line in snippet.splitlines() if line.endswith(r"\\")]
    split = lambda line: [c.strip() for c in re.split(r"(?<!\\)&", line)]  # noqa: E731
    head = [names[h] for h in split(lines[0])]
    rows, family = [], {}
    for line in lines[1:]:
        found = re.fullmatch(
            r"\\multicolumn\{\d+\}\{@\{\}l\}\{\\textbf\{(.*)\} "
            r"\(adjustment: (.*); tests in family: (\d+)\)\}",
            line,
        )
        if found:
            family = dict(zip(("family", "adjustment", "family_size"), found.groups(), strict=True))
        else:
            rows.append({**dict(zip(head, split(line), strict=True)), **family})
    return rows


def _tex_header(column: str) -> str:
    entry = next(t for t in TEX_TABLES if t.file == "comparisons")
    return tex_escape(entry.headers.get(column, column.replace("_", " ")))


def test_every_format_shows_each_comparisons_p_values_method_family_and_counts(report):
    expected = pd.read_csv(report / "comparisons.csv").to_dict("records")
    assert len(expected) >= 10  # two models, five axes: the families are not empty
    assert {r["adjustment"] for r in expected} >= {"Holm", "Westfall-Young max-T"}
    formats = {
        "md": (_md_rows((report / "report.md").read_text()), lambda c: c),
        "html": (_html_rows((report / "report.html").read_text()), lambda c: c),
        # tex: a heading row per family says its adjustment and size
        "tex": (_tex_rows((report / "tex" / "comparisons.tex").read_text()), lambda c: c),
    }
    for name, (rows, head) in formats.items():
        assert len(rows) == len(expected), name
        for row, want in zip(rows, expected, strict=True):
            for column in (*SHOWN, "family"):
                assert head(column) in row, f"{name}: no {column} column ({sorted(row)})"
                text = format_cell(column, want[column])
                shown = tex_escape(text) if name == "tex" else text
                assert row[head(column)] == shown, (name, column, row)


def test_the_findings_are_in_every_output_and_follow_the_answers(report):
    findings = pd.read_csv(report / "findings.csv")
    sentences = list(findings["sentence"])
    # five axes over all models and over the instruct model, the literature, the noise floor
    assert len(sentences) == 12 and all(sentences)
    doc = json.loads((report / "report.json").read_text())
    assert [r["sentence"] for r in doc["tables"]["findings"]["rows"]] == sentences
    # each test's finding carries the p values of its comparison (its family's test of that
    # value at the baseline; the topic int4 is the precision axis' value)
    comparisons = pd.read_csv(report / "comparisons.csv")
    tested = findings.dropna(subset=["family"])
    assert len(tested) == 10
    for f in tested.to_dict("records"):
        [c] = comparisons[
            (comparisons["family"] == f["family"])
            & (comparisons["value"] == f["values"])
            & (comparisons["at"] == "baseline")
        ].to_dict("records")
        assert (f["p_value"], f["p_adjusted"]) == (c["p_value"], c["p_adjusted"])
        assert (f["adjustment"], f["family_size"]) == (c["adjustment"], c["family_size"])

    md = (report / "report.md").read_text()
    assert re.findall(r"^## (\w+)", md, re.M)[:3] == ["Answers", "Findings", "Notes"]
    section = _section(md, "## Findings", "\n## ")
    assert re.findall(r"^- (.*)$", section, re.M) == sentences

    page = (report / "report.html").read_text()
    assert re.findall(r'<h2 id="(\w+)"', page)[:3] == ["answers", "findings", "notes"]
    section = _section(page, '<h2 id="findings">', "<h2 ")
    assert [html.unescape(s) for s in re.findall(r"<li>(.*?)</li>", section)] == sentences
