"""The HTML report in a real headless browser (Chromium) at 1400 px: the answers table is in the
first screen, no table is wider than the viewport, and the page draws its tables and figures.

The page is laid out by Chromium itself: a copy of report.html with a small script that opens
every folded table and writes the measured geometry into the DOM is loaded with `--dump-dom`,
and the measurements are read back from the dumped page. Screenshots of the first screen and of
the whole page stay in the test's temporary folder (CI keeps them as artifacts).

Skipped, with the reason, when no Chromium is installed (CI installs Debian's `chromium`)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from orchestrator.cli import main
from storage.store import Store
from tests.fixtures_store import Spec, write_grid_store, write_setting, write_synthetic_store

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
WIDTH, HEIGHT = 1400, 900
# Runs after the page is laid out: the answers section's place before anything is unfolded,
# then every <details> opened and each table's box, with the section (h2) it belongs to.
MEASURE = """<script>
const first = document.querySelector('h2[id]');
const answers = document.getElementById('answers');
const next = document.querySelector('#answers ~ table, #answers ~ p.empty');
const out = {window_width: window.innerWidth,
  viewport_width: document.documentElement.clientWidth,
  viewport_height: window.innerHeight, first_section: first.id,
  answers_top: answers.getBoundingClientRect().top,
  answers_content_top: next.getBoundingClientRect().top, tables: []};
document.querySelectorAll('details').forEach(d => { d.open = true; });
let section = null;
document.querySelectorAll('h2[id], table').forEach(el => {
  if (el.tagName === 'H2') { section = el.id; return; }
  const r = el.getBoundingClientRect();
  out.tables.push({section: section, left: r.left, right: r.right, width: r.width,
                   columns: el.querySelectorAll('thead th').length});
});
out.page_width = document.documentElement.scrollWidth;
const pre = document.createElement('pre');
pre.id = 'measured';
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def screenshot(browser: str, page: Path, out: Path, profile: Path, height: int = HEIGHT) -> None:
    done = _run(
        browser,
        profile,
        f"--screenshot={out}",
        f"--window-size={WIDTH},{height}",
        page.resolve().as_uri(),
    )
    assert out.is_file(), f"chromium wrote no screenshot (rc {done.returncode}): {done.stderr}"


def measure(browser: str, page: Path, profile: Path) -> dict:
    probe = page.with_name("measure.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"))
    done = _run(
        browser, profile, "--virtual-time-budget=5000", "--dump-dom", probe.resolve().as_uri()
    )
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no measurements in the dumped page (rc {done.returncode}): {done.stderr}"
    return json.loads(html.unescape(found.group(1)))


def tiny_store(root: str) -> None:
    """18 settings of a model without literature rows (3 templates x 3 decodings x 2 lengths)."""
    store = Store(root)
    for template in ("own", "instruct", "chat"):
        for decoding in ("greedy", "t0.2", "t0.8"):
            for length in (512, 2048):
                write_setting(store, Spec("tiny", template, decoding, length, "fp32", 7))


STORES = {"synthetic": write_synthetic_store, "paper_grid": write_grid_store, "tiny": tiny_store}


@pytest.fixture(params=sorted(STORES))
def rendered(request, tmp_path):
    store = tmp_path / "store"
    STORES[request.param](str(store))
    out = tmp_path / "report"
    rc = main(
        [
            "report",
            "--store",
            str(store),
            "--out",
            str(out),
            "--format",
            "html",
            "--resamples",
            "200",
        ]
    )
    assert rc == 0
    return request.param, out / "report.html", tmp_path


@pytest.mark.skipif(chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_answers_first_and_every_table_fits_1400_px(rendered):
    name, page, tmp = rendered
    got = measure(chromium(), page, tmp / "profile")
    assert got["window_width"] == WIDTH  # the viewport is that less a scroll bar
    assert got["first_section"] == "answers"
    # the answers table (or, on a store without literature rows, the reason) in the first screen
    assert got["answers_top"] < got["viewport_height"] / 2
    assert got["answers_content_top"] < got["viewport_height"] - 100
    assert got["tables"], "no table was rendered"
    too_wide = [t for t in got["tables"] if t["right"] > got["viewport_width"] + 0.5]
    assert not too_wide, f"{name}: tables wider than {WIDTH} px: {too_wide}"
    assert got["page_width"] <= got["viewport_width"], f"{name}: the page scrolls sideways"
    sections = {t["section"] for t in got["tables"]}
    if name != "tiny":
        assert {"answers", "scores_pivot", "effects", "grid"} <= sections
    else:
        assert "answers" not in sections and "scores_pivot" in sections
        text = page.read_text(encoding="utf-8")
        assert "No literature row names a model of this store (tiny)" in text


@pytest.mark.skipif(chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_html_report_renders_in_headless_chromium(rendered):
    name, page, tmp = rendered
    first = tmp / "first-screen.png"
    screenshot(chromium(), page, first, tmp / "profile")
    whole = tmp / "report.png"
    screenshot(chromium(), page, whole, tmp / "profile", height=3000)
    image = imread(whole)  # floats in [0, 1], height x width x channels
    assert image.shape[:2] == (3000, WIDTH)
    rgb = image[..., :3]
    # Something was drawn: not a blank page, and a fair share of non-white pixels (tables,
    # figures); the embedded figures put colour on the page.
    assert rgb.std() > 0.05
    assert (rgb < 0.95).any(axis=2).mean() > 0.05
    if name != "tiny":  # a store without literature rows or effects has no figure
        saturated = (rgb.max(axis=2) - rgb.min(axis=2) > 0.3).mean()
        assert saturated > 0.002, "no coloured pixels: the figures did not render"
    assert np.isfinite(rgb).all()
    assert imread(first).shape[:2] == (HEIGHT, WIDTH)


@pytest.mark.skipif(chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_the_measurements_catch_a_wide_table_and_answers_below_the_first_screen(tmp_path):
    """The checks above can fail: a page with a 400-character unbreakable cell and the answers
    below 2000 px of other content is measured as too wide and too late."""
    page = tmp_path / "bad.html"
    cell = "x" * 400
    page.write_text(
        f'<html><body><div style="height:2000px"></div><h2 id="answers">A</h2><p>d</p>'
        f"<table><tr><td>{cell}</td></tr></table></body></html>",
        encoding="utf-8",
    )
    got = measure(chromium(), page, tmp_path / "profile")
    assert got["answers_top"] > got["viewport_height"]
    assert got["tables"][0]["right"] > got["viewport_width"]
    assert got["page_width"] > got["viewport_width"]
