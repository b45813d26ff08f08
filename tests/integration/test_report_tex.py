"""The LaTeX report compiled by a real TeX: `report --format tex`, then `pdflatex` on the
standalone report.tex (non-interactive, with a timeout, twice so that the grid's longtable
settles), on three stores: the synthetic store, the 120-setting paper grid (a grid of several
pages) and a store whose names need escaping (StarChat-β, TeX's special characters, accents).
The PDF must use only vector fonts, hold the escaped names as text, and its first page is
rendered to first-page.png with pdftoppm, kept in the test's temporary folder (look at it). The
answers table on page 1 keeps the text's size (word heights from `pdftotext -bbox`): its notes
wrap under their rows instead of widening the table, which the document's fit used to shrink to
55-60%.

Skipped, with the reason, when pdflatex is not installed (CI installs Debian's
texlive-latex-base, texlive-latex-recommended and poppler-utils: .ci/system-packages.sh)."""

from __future__ import annotations

import html
import re
import shutil
import statistics
import subprocess
import unicodedata
from pathlib import Path

import pytest
from matplotlib.image import imread

from orchestrator.cli import main
from storage.literature import COLUMNS
from storage.store import Store
from tests.fixtures_store import Spec, write_grid_store, write_setting, write_synthetic_store

PDFLATEX = shutil.which("pdflatex")
pytestmark = pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex not installed (apt-get install texlive-latex-base "
    "texlive-latex-recommended poppler-utils)",
)
TIMEOUT_S = 120
MODEL = "starchat-β_15b"
LOCATION = 'Table 2 — pass@1 (%) & "zero-shot" ~50% {x}_y^z #1 $5 \\ <a|b> Müller–Gödel…'


def escaping_store(root: str) -> list[str]:
    """A model whose names need escaping; returns the report options that go with it."""
    store = Store(root)
    write_setting(store, Spec(MODEL, "own", "greedy", 2048, "bf16", 30))  # 30/164 = 18.29
    write_setting(store, Spec(MODEL, "instruct", "greedy", 2048, "bf16", 25))
    folder = Path(root).parent
    rows = [",".join(COLUMNS)]
    for value in ("18.3", "18.1"):  # reproduced; no k/164 (29/164 = 17.68, 30/164 = 18.29)
        location = LOCATION.replace('"', '""')
        rows.append(
            f'StarChat-β,StarChat,15.5,instruct,{value},arXiv:2308.07124,"OctoPack — Müller",'
            f'"{location}",n=1,primary-source'
        )
    (folder / "lit.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (folder / "map.yaml").write_text(
        f'benchmark: humanevalfix\nvariants: [tests]\nmodels:\n  "StarChat-β": "{MODEL}"\n',
        encoding="utf-8",
    )
    return ["--literature", str(folder / "lit.csv"), "--mapping", str(folder / "map.yaml")]


def synthetic(root: str) -> list[str]:
    write_synthetic_store(root)
    return []


def paper_grid(root: str) -> list[str]:
    write_grid_store(root)
    return []


STORES = {"synthetic": synthetic, "paper_grid": paper_grid, "escaping": escaping_store}


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} not found: install poppler-utils next to pdflatex"
    return found


def _pdflatex(folder: Path, document: str = "report.tex") -> subprocess.CompletedProcess:
    argv = [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape"]
    return subprocess.run(
        [*argv, document],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="module", params=sorted(STORES))
def compiled(request, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp(request.param)
    store = tmp_path / "store"
    options = STORES[request.param](str(store))
    out = tmp_path / "report"
    argv = ["report", "--store", str(store), "--out", str(out), "--format", "tex"]
    assert main([*argv, "--resamples", "200", *options]) == 0
    for _ in range(2):  # longtable settles its column widths on the second run
        done = _pdflatex(out)
        assert done.returncode == 0, f"pdflatex failed:\n{done.stdout[-3000:]}"
    return request.param, out, tmp_path


def test_pdflatex_compiles_the_report_and_its_first_page_renders(compiled):
    name, out, tmp_path = compiled
    pdf = out / "report.pdf"
    assert pdf.is_file()
    log = (out / "report.log").read_text(errors="replace")
    assert "Rerun to get" not in log and "Table widths have changed" not in log
    assert "Missing character" not in log
    fonts = subprocess.run(
        [_tool("pdffonts"), str(pdf)], capture_output=True, text=True, check=True
    ).stdout
    assert "Type 3" not in fonts, f"a bitmap font (a character LaTeX drew from METAFONT):\n{fonts}"
    text = subprocess.run(
        [_tool("pdftotext"), "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    text = unicodedata.normalize("NFC", text)  # an accent LaTeX set on a letter: one character
    assert "reprogrid report" in text and "Scores per model" in text
    assert "hover" not in text and "(html)" not in text
    if name == "escaping":
        assert "StarChat-β" in text and "starchat-β" in text  # the literature and store names
        assert "Müller–Gödel" in text and "50%" in text and "$5" in text
        assert "no k/164 gives 18.1; nearest 29/164 = 17.68, 30/164 = 18.29" in text
    else:
        assert "Every setting" in text
    first = tmp_path / "first-page.png"
    subprocess.run(
        [_tool("pdftoppm"), "-png", "-r", "110", "-f", "1", "-l", "1", "-singlefile", str(pdf)]
        + [str(first.with_suffix(""))],
        check=True,
        timeout=TIMEOUT_S,
    )
    image = imread(first)  # floats in [0, 1]
    height, width = image.shape[:2]
    assert width > height > 600  # landscape A4 at 110 dpi: 1286 x 909
    rgb = image[..., :3]
    inked = (rgb < 0.5).any(axis=2).mean()
    assert 0.01 < inked < 0.5, f"first page {inked:.1%} inked: blank or a black box"


def test_a_paper_inputs_every_snippet_with_booktabs_and_array(compiled):
    """What docs/report.md says a paper needs: booktabs and array (longtable for the grid)."""
    out = compiled[1]
    paper = ["\\documentclass{article}", "\\usepackage{booktabs,array,longtable}"]
    paper += ["\\begin{document}"]
    for snippet in sorted((out / "tex").glob("*.tex")):
        body = f"\\input{{tex/{snippet.stem}}}"
        long = "\\begin{longtable}" in snippet.read_text()
        paper.append(body if long else f"{{\\tiny {body}}}\\par")
    (out / "paper.tex").write_text("\n".join([*paper, "\\end{document}", ""]))
    for _ in range(2):
        done = _pdflatex(out, "paper.tex")
        assert done.returncode == 0, f"a paper that inputs the snippets:\n{done.stdout[-3000:]}"
    assert (out / "paper.pdf").stat().st_size > 0


WORD = re.compile(
    r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>'
)
MARGIN_PT = 1.5 * 72 / 2.54  # report.tex: geometry margin=1.5cm


def page_words(pdf: Path, page: int) -> tuple[float, list[tuple[float, float, float, str]]]:
    """The page's width and its words as (top, bottom, right, text), in points."""
    argv = [_tool("pdftotext"), "-bbox", "-f", str(page), "-l", str(page), str(pdf), "-"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    width = float(re.search(r'<page width="([\d.]+)"', out).group(1))
    words = [
        (float(top), float(bottom), float(right), html.unescape(text))
        for _, top, right, bottom, text in WORD.findall(out)
    ]
    return width, words


def test_the_answers_table_on_page_1_keeps_the_texts_size_and_the_margins(compiled):
    """Body text: the answers' description (between its heading and the table's header row);
    the table: from its header row to the line of its last setting key (cells, intervals,
    12-character keys, the notes between rows). The table's median word is at least 85% as tall
    as the body's (a table shrunk to fit is 55-60%: 4.1-4.7 pt against 7.96 pt), and no word
    crosses the right margin (a note that does not wrap would)."""
    _, out, _ = compiled
    width, words = page_words(out / "report.pdf", 1)
    heading = next(w for w in words if w[3] == "Answers:")
    header = next(w for w in words if w[3] == "decoding" and w[0] > heading[1])
    keys = [w for w in words if re.fullmatch(r"[0-9a-f]{12}", w[3]) and w[0] > header[1]]
    body = [w[1] - w[0] for w in words if heading[1] < w[0] and w[1] < header[0] - 1]
    table = [w[1] - w[0] for w in words if header[0] - 1 <= w[0] <= keys[-1][1] + 1]
    assert len(body) > 30 and len(table) > 30 and keys
    ratio = statistics.median(table) / statistics.median(body)
    assert ratio >= 0.85, f"table words {ratio:.0%} of the body's height: the table was shrunk"
    right = max(w[2] for w in words)
    assert right <= width - MARGIN_PT + 1, f"a word ends at {right:.1f} pt, past the margin"


def test_empty_tables_say_why_at_the_texts_size_and_options_keep_their_hyphens(tmp_path):
    """A store of one model at fp32 and int8: no literature row names it, no setting is at the
    bf16 baseline, so the answers, the effects and the comparisons are empty. Each says why in
    a paragraph at the text's size (as a snippet, a header and one line of reason, the fit
    scaled it to about 4 pt), and the options those reasons name print as typed (--literature,
    not an en dash). Every page is rendered to page-N.png in the test's folder (look at them)."""
    store = Store(str(tmp_path / "store"))
    write_setting(store, Spec("tiny", "own", "greedy", 2048, "fp32", 20))
    write_setting(store, Spec("tiny", "own", "greedy", 2048, "int8", 12))
    out = tmp_path / "report"
    argv = ["report", "--store", store.uri, "--out", str(out), "--format", "tex"]
    assert main([*argv, "--resamples", "100"]) == 0
    document = (out / "report.tex").read_text()
    assert r"\input{tex/effects}" not in document and r"\input{tex/scores}" in document
    for _ in range(2):
        done = _pdflatex(out)
        assert done.returncode == 0, f"pdflatex failed:\n{done.stdout[-3000:]}"
    pdf = out / "report.pdf"
    text = subprocess.run(
        [_tool("pdftotext"), "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert "published values with --literature FILE and its name with --mapping YAML" in text
    assert "another baseline with --baseline KEY=VALUE" in text and "\u2013" not in text
    info = subprocess.run([_tool("pdfinfo"), str(pdf)], capture_output=True, text=True, check=True)
    pages = int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.MULTILINE).group(1))
    subprocess.run(
        [_tool("pdftoppm"), "-png", "-r", "60", str(pdf), str(tmp_path / "page")],
        check=True,
        timeout=TIMEOUT_S,
    )
    assert len(list(tmp_path.glob("page-*.png"))) == pages
    body, said = [], []
    for page in range(1, pages + 1):
        _, words = page_words(pdf, page)
        body += [bottom - top for top, bottom, _, word in words if word == "the"]
        said += [(bottom - top, w) for top, bottom, _, w in words if w in ("FILE", "KEY=VALUE.")]
    # the answers' reason (FILE), the findings' sentence, the effects' and comparisons' reasons
    assert sorted(w for _, w in said) == ["FILE", *["KEY=VALUE."] * 3]
    for height, _ in said:
        assert height >= 0.85 * statistics.median(body), f"{said}: a reason was shrunk"
