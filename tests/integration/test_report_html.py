"""The HTML report renders in a real headless browser (Chromium), with its tables and figures.

Skipped, with the reason, when no Chromium is installed (CI installs Debian's `chromium`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from orchestrator.cli import main
from tests.fixtures_store import write_synthetic_store

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)  # fmt: skip


def chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(browser: str, page: Path, out: Path, profile: Path, size=(1400, 3000)) -> None:
    argv = [
        browser, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={out}",
        f"--window-size={size[0]},{size[1]}", page.resolve().as_uri(),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert out.is_file(), (
        f"chromium wrote no screenshot (rc {done.returncode}): {done.stderr[-2000:]}"
    )


@pytest.mark.skipif(chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_html_report_renders_in_headless_chromium(tmp_path):
    store = tmp_path / "store"
    write_synthetic_store(str(store))
    out = tmp_path / "report"
    rc = main(["report", "--store", str(store), "--out", str(out), "--format", "html",
               "--resamples", "200"])  # fmt: skip
    assert rc == 0
    page = out / "report.html"
    html = page.read_text(encoding="utf-8")
    assert '<h2 id="literature">' in html and '<h2 id="effects">' in html

    shot = tmp_path / "report.png"
    screenshot(chromium(), page, shot, tmp_path / "profile")
    image = imread(shot)  # floats in [0, 1], height x width x channels
    assert image.shape[:2] == (3000, 1400)
    rgb = image[..., :3]
    # Something was drawn: not a blank page, and a fair share of non-white pixels (tables,
    # figures); the embedded figures put colour on the page.
    assert rgb.std() > 0.05
    non_white = (rgb < 0.95).any(axis=2).mean()
    assert non_white > 0.05
    saturated = (rgb.max(axis=2) - rgb.min(axis=2) > 0.3).mean()
    assert saturated > 0.002, "no coloured pixels: the figures did not render"
    assert np.isfinite(rgb).all()
