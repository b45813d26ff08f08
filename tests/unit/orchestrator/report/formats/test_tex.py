"""The LaTeX output without a TeX installation: the escaping of text and Unicode, the snippets'
shape (booktabs tabulars with as many cells per row as columns), the standalone document that
inputs them, and the registry that makes a new table one entry. tests/integration/
test_report_tex.py compiles the result with pdflatex."""

from __future__ import annotations

import logging
import re
from dataclasses import replace

import pytest

from orchestrator.cli.report import card_from_registry
from orchestrator.report.formats import tex, textables
from orchestrator.report.formats.render import write_report
from orchestrator.report.formats.texescape import tex_escape
from orchestrator.report.tables.build import build_report
from orchestrator.report.tables.data import ReportOptions
from tests.fixtures_store import INST, write_synthetic_store


@pytest.mark.parametrize(
    ("text", "latex"),
    [
        ("50% & $5 #1", r"50\% \& \ensuremath{\$}5 \#1"),
        ("a_b {c} ~ ^ \\", r"a\_b \{c\} \textasciitilde{} \textasciicircum{} \textbackslash{}"),
        ("<a|b>", r"\ensuremath{<}a\ensuremath{|}b\ensuremath{>}"),
        ("StarChat-β", r"StarChat-\ensuremath{\beta}"),
        ("ΔΣ Ω", r"\ensuremath{\Delta}\ensuremath{\Sigma} \ensuremath{\Omega}"),
        ("Α", "A"),  # a Greek capital that looks Latin has no command: the Latin letter
        ("Müller, Gödel, José, François", r"M\"{u}ller, G\"{o}del, Jos\'{e}, Fran\c{c}ois"),
        ("čš ő", r"\v{c}\v{s} \H{o}"),
        ("Straße, Łódź", r"Stra\ss{}e, \L{}\'{o}d\'{z}"),
        ("2–3 — “q” ‘s’ …", r"2--3 --- ``q'' `s' \ldots{}"),
        (
            "≤ ≥ ± × → ∞",
            r"\ensuremath{\leq} \ensuremath{\geq} \ensuremath{\pm} "
            r"\ensuremath{\times} \ensuremath{\rightarrow} \ensuremath{\infty}",
        ),
        ("ﬁne", "fine"),  # a compatibility ligature decomposes
        ("a\nb", "a b"),
        ('"zero-shot" ("a")', "``zero-shot'' (``a'')"),
        # code: an option and a `span` in typewriter type, hyphens apart (TeX: -- is an en dash)
        (
            "with --literature FILE, `reprogrid repeat-check`.",
            r"with \texttt{-{}-literature} FILE, \texttt{reprogrid repeat-check}.",
        ),
        ("a--b x-y -- 2–3", r"a-{}-b x-y -{}- 2--3"),
        ('`a_b` "q"', r"\texttt{a\_b} ``q''"),
    ],
)
def test_tex_escape(text, latex):
    assert tex_escape(text) == latex
    assert latex.isascii()


def test_a_character_latex_cannot_show_is_visible_and_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="orchestrator.report.formats.texescape"):
        assert tex_escape("模型 x") == "[U+6A21][U+578B] x"
    assert "U+6A21" in caplog.text and "CJK UNIFIED IDEOGRAPH" in caplog.text


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    store = tmp_path_factory.mktemp("tex") / "store"
    write_synthetic_store(str(store))
    return build_report(str(store), ReportOptions(card_of=card_from_registry, n_resamples=200))


def _rows(text: str) -> list[str]:
    """The data rows of a snippet: lines ending in \\\\ that are not a spanning row."""
    return [
        line
        for line in text.splitlines()
        if line.endswith(r"\\") and not line.startswith(r"\multicolumn")
    ]


def _n_columns(text: str) -> int:
    spec = re.search(r"\\begin\{(?:tabular|longtable)\}\{@\{\}(.*)@\{\}\}", text).group(1)
    spec = re.sub(r">\{[^{}]*\}", "", spec)  # >{\raggedright\arraybackslash}
    return len(re.findall("[lrcp]", re.sub(r"p\{[^}]*\}", "p", spec)))


def test_every_snippet_is_a_booktabs_table_with_a_cell_per_column(data):
    snippets = tex.snippets(data)
    assert list(snippets) == [f"tex/{e.file}.tex" for e in tex.TEX_TABLES]
    for path, text in snippets.items():
        assert text.isascii(), path
        long = next(t for t in textables.TEX_TABLES if t.file == path[4:-4]).long
        env = "longtable" if long else "tabular"
        assert text.count(rf"\begin{{{env}}}") == 1 and text.rstrip().endswith(rf"\end{{{env}}}")
        assert r"\toprule" in text and r"\midrule" in text and r"\bottomrule" in text
        width = _n_columns(text)
        rows = _rows(text)
        assert len(rows) >= 2, path  # the header and at least one row on this store
        for row in rows:
            # an escaped \& is text, not a column separator
            assert len(re.split(r"(?<!\\)&", row)) == width, (path, row)
        assert "hover" not in text and "(html)" not in text and "<" not in text


def test_the_snippets_show_the_scores_with_their_intervals(data):
    snippets = tex.snippets(data)
    grid = data.table("grid")
    row = grid[(grid.model_name == INST) & (grid.precision == "fp16")].iloc[0]
    interval = (
        rf"{row.score_pct:.2f}\,{{\scriptsize [{row.ci_low_pct:.2f}, {row.ci_high_pct:.2f}]}}"
    )
    assert interval in snippets["tex/scores.tex"]  # the pivot cell of this setting
    assert interval in snippets["tex/grid.tex"]
    assert rf"\texttt{{{row.setting_key[:12]}}}" in snippets["tex/grid.tex"]
    assert r"\textbf{" + INST + "}" in snippets["tex/answers.tex"]  # the model's heading row


def test_the_standalone_document_inputs_every_snippet_in_order(data):
    doc = tex.render_tex(data, {"answers": [("Reported values", "literature.png")]})
    inputs = re.findall(r"\\input\{(tex/\w+)\}", doc)
    assert inputs == [f"tex/{e.file}" for e in tex.TEX_TABLES]
    assert doc.index(r"\subsection*{Notes}") < doc.index(r"\input{tex/scores}")
    assert doc.index(r"\input{tex/answers}") < doc.index("literature.png")
    assert r"\usepackage{booktabs,array,longtable,graphicx}" in doc
    assert doc.isascii() and "hover" not in doc and "(html)" not in doc


def test_a_new_table_is_one_registry_entry(data, tmp_path, monkeypatch):
    """What another table needs (the findings, say): one TexTable naming the report table."""
    entry = textables.TexTable("unmatched", "literature_unmatched", "Rows without settings.")
    monkeypatch.setattr(tex, "TEX_TABLES", (*tex.TEX_TABLES, entry))
    written = write_report(data, tmp_path, ["tex"])
    assert tmp_path / "tex" / "unmatched.tex" in written
    snippet = (tmp_path / "tex" / "unmatched.tex").read_text()
    assert snippet.startswith("% reprogrid report: Literature rows without measured settings")
    assert "literature model" in snippet  # the columns md and html show, underscores as spaces
    assert r"\input{tex/unmatched}" in (tmp_path / "report.tex").read_text()
    with pytest.raises(KeyError, match="shows 'no_such_table'"):
        tex.snippet(replace(entry, table="no_such_table"), data)


def test_an_empty_table_says_why_in_its_snippet(data):
    empty = replace(
        next(t for t in data.tables if t.name == "effects"),
        frame=data.table("effects").iloc[0:0],
        empty_reason="No model has a baseline setting_x & a one-axis change.",
    )
    tables = tuple(empty if t.name == "effects" else t for t in data.tables)
    text = tex.snippet(
        next(t for t in textables.TEX_TABLES if t.file == "effects"), replace(data, tables=tables)
    )
    assert r"\emph{No model has a baseline setting\_x \& a one-axis change.}" in text


def test_the_findings_snippet_holds_each_test_with_its_sentence_and_the_notes_follow_it(data):
    snippets = tex.snippets(data)
    findings = data.table("findings")
    lines = snippets["tex/findings.tex"].splitlines()
    effect = findings[findings.topic == "int4"].iloc[0]
    sentence = tex_escape(f"sentence: {effect.sentence}")
    at = next(i for i, line in enumerate(lines) if sentence in line)
    assert lines[at].startswith(r"\multicolumn{") and " & " in lines[at - 1]  # under its row
    low, high = f"{effect.ci_low_pp:.2f}", f"{effect.ci_high_pp:.2f}"
    assert tex_escape(f"[{low}, {high}]") in lines[at - 1].replace(r"\ensuremath{-}", "-")
    assert "Holm" not in lines[at - 1]  # the method is in the description, not every row
    comparisons = snippets["tex/comparisons.tex"]
    assert comparisons.count(r"\\") >= len(data.table("comparisons"))
    document = tex.render_tex(data, {})
    assert document.index(r"\input{tex/findings}") < document.index("Notes")
    assert document.index("Notes") < document.index(r"\input{tex/scores}")


def _with(data, name: str, frame, reason: str = ""):
    """`data` with table `name` holding `frame` (and `reason` for its empty_reason)."""
    table = next(t for t in data.tables if t.name == name)
    changed = replace(table, frame=frame, empty_reason=reason or table.empty_reason)
    return replace(data, tables=tuple(changed if t.name == name else t for t in data.tables))


def test_the_document_says_why_a_table_is_empty_instead_of_setting_it(data):
    """An empty table's snippet is a header and one line of reason, which the document's fit
    scaled down to the line (to about 4 pt): the document says the reason instead."""
    empty = data.table("effects").iloc[0:0]
    document = tex.render_tex(_with(data, "effects", empty, "No pairs; see --baseline."), {})
    assert r"\input{tex/effects}" not in document
    assert r"\noindent\emph{No pairs; see \texttt{-{}-baseline}.}\par" in document
    assert r"\input{tex/scores}" in document and r"\input{tex/grid}" in document


def test_findings_without_a_test_are_listed_not_set_as_a_table_of_empty_columns(data):
    findings = data.table("findings")
    untested = findings[findings["p_adjusted"].isna()]
    assert set(untested["topic"]) == {"literature", "noise"}  # the store-wide sentences
    document = tex.render_tex(_with(data, "findings", untested), {})
    assert r"\input{tex/findings}" not in document
    listed = [r"\item " + tex_escape(s) for s in untested["sentence"]]
    at = document.index(r"\begin{itemize}", document.index("Findings"))
    assert document[at:].split(r"\end{itemize}")[0].split("\n")[1:-1] == listed
    assert r"\input{tex/findings}" in tex.render_tex(data, {})  # with its tests: the table
