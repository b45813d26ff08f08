"""The problems view at the study's size: a synthetic store of --models models x 60 settings
(paper60) x 164 problems, one greedy sample each, with texts of realistic length; then
`write_view` (and again, with nothing changed) and the page in headless Chromium (Selenium and
Debian's chromedriver).

    python perf/problems_view.py                 # 11 models, as the study
    python perf/problems_view.py --models 2

Prints the time to write the store and the view (built, then reused), the bytes the page loads
when opened (the budget is 2 MB), and in the browser: the time until the first model's matrix
is drawn (navigation start -> drawn, `performance.now()`), a click until the sample's texts
show, choosing two settings until their paired counts show (computed by the page from the
matrix), and the interval resampled on request. Timings vary with the machine's load.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path

# This checkout's packages first (Python puts the script's folder, perf/, on the path, not the
# repository root): the script measures the code it sits in, whichever checkout is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from orchestrator.report.view.folder import ViewOptions, write_view
from storage.store import Store

GRID = list(
    itertools.product(
        ("own", "instruct"),
        ("greedy", "t0.2", "t0.8"),
        (512, 2048),
        ("bf16", "fp16", "fp32", "int8", "int4"),
    )
)
N_PROBLEMS = 164


def _text(rng: np.random.Generator, chars: int) -> str:
    words = ["def", "return", "x", "for", "in", "range(n):", "if", "else:", "candidate", "=="]
    out = " ".join(rng.choice(words, size=chars // 5))
    return "\n".join(out[i : i + 72] for i in range(0, len(out), 72))


def write_store(root: str, n_models: int, seed: int = 0) -> int:
    """The synthetic store; returns the number of settings."""
    store = Store(root)
    rng = np.random.default_rng(seed)
    prompts = {t: [_text(rng, 1500) for _ in range(N_PROBLEMS)] for t in ("own", "instruct")}
    n = 0
    for m in range(n_models):
        skill = rng.random(N_PROBLEMS)  # how easy each problem is for this model
        for s, (template, decoding, length, precision) in enumerate(GRID):
            key = f"{m:04d}{s:04d}".ljust(64, "a")
            store.write_rows(
                "settings",
                key,
                [
                    {
                        "setting_key": key,
                        "status": "complete",
                        "model_name": f"model-{m:02d}",
                        "benchmark": "humanevalfix",
                        "variant": "tests",
                        "template": "deepseek" if template == "own" else template,
                        "template_kind": template,
                        "decoding": decoding,
                        "max_length": length,
                        "precision": precision,
                        "backend": "hf",
                        "n_samples": 1,
                    }
                ],
            )
            passed = rng.random(N_PROBLEMS) < skill * 0.8
            gens, execs = [], []
            for p in range(N_PROBLEMS):
                program = _text(rng, 400)
                gens.append(
                    {
                        "setting_key": key,
                        "task_id": f"Python/{p}",
                        "sample_index": 0,
                        "prompt": prompts[template][p],
                        "continuation": program + "\n" + _text(rng, 200),
                        "program": program,
                        "n_prompt_tokens": 400,
                        "n_output_tokens": 150,
                        "prompt_truncated": False,
                        "hit_length_limit": bool(length == 512 and rng.random() < 0.05),
                    }
                )
                ok = bool(passed[p])
                execs.append(
                    {
                        "setting_key": key,
                        "task_id": f"Python/{p}",
                        "sample_index": 0,
                        "outcome": "passed" if ok else "failed",
                        "passed": ok,
                        "error_type": None if ok else "AssertionError",
                        "error_message": None if ok else "assert candidate(3) == 9",
                    }
                )
            store.write_rows("generations", key, gens)
            store.write_rows("executions", key, execs)
            n += 1
    return n


def browser_timings(index: Path) -> dict[str, float] | None:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
    except ImportError:
        return None
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        return None
    options = Options()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)

    def until(script: str) -> None:
        while not driver.execute_script(f"return {script}"):
            time.sleep(0.01)

    try:
        driver.get(index.as_uri())
        until("document.body.dataset.ready")
        opened = float(driver.execute_script("return window.reprogridView.state.openedMs"))
        # Timed inside the page (a promise per action), not through WebDriver round trips.
        timed = (
            "const done = arguments[arguments.length - 1], v = window.reprogridView;"
            "const g = v.state.group, t = performance.now();"
        )
        click = driver.execute_async_script(
            timed + "v.select(g.problems[100], g.settings[7].key)"
            ".then(() => done(performance.now() - t));"
        )
        pair = driver.execute_async_script(
            timed + "v.compare(g.settings[1].key, g.settings[41].key)"
            ".then(() => done(performance.now() - t));"
        )
        assert driver.find_element(By.ID, "pair-b").text.isdigit()
        interval = driver.execute_script(
            "const t = performance.now(); document.getElementById('pair-resample').click();"
            "return performance.now() - t;"
        )
        assert driver.find_element(By.ID, "pair-interval").text.startswith("[")
    finally:
        driver.quit()
    return {"open_ms": opened, "click_ms": click, "pair_ms": pair, "interval_ms": interval}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        start = time.perf_counter()
        n = write_store(str(root / "store"), args.models)
        store_s = time.perf_counter() - start
        start = time.perf_counter()
        options = ViewOptions(root / "view")
        summary = write_view(Store(str(root / "store")), options)
        view_s = time.perf_counter() - start
        start = time.perf_counter()
        again = write_view(Store(str(root / "store")), options)
        again_s = time.perf_counter() - start
        size = sum(f.stat().st_size for f in (root / "view").rglob("*") if f.is_file())
        print(f"store: {args.models} models x 60 settings x {N_PROBLEMS} problems ({n} settings)")
        print(f"write store {store_s:8.1f} s")
        built = f"{len(summary.built)} models built, {size / 1e6:.1f} MB"
        print(f"write view  {view_s:8.1f} s  ({built})")
        print(f"again       {again_s:8.1f} s  ({len(again.built)} models built)")
        print(f"first page  {summary.first_page_bytes / 1e6:8.3f} MB (budget 2 MB)")
        print(f"            {', '.join(summary.first_page)}")
        timings = browser_timings(root / "view" / "index.html")
        if timings is None:
            print("browser: Selenium, Chromium or chromedriver missing; not measured")
            return
        print(f"open (60 settings x {N_PROBLEMS} problems drawn) {timings['open_ms']:7.0f} ms")
        print(f"click a cell -> texts shown                    {timings['click_ms']:7.0f} ms")
        print(f"choose two settings -> paired counts shown      {timings['pair_ms']:7.0f} ms")
        print(f"interval on request (10,000 draws)              {timings['interval_ms']:7.0f} ms")


if __name__ == "__main__":
    main()
