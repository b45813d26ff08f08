"""The problems view in a real headless Chromium, driven by Selenium through Debian's
chromedriver (`.ci/system-packages.sh` installs both; Selenium never downloads a browser or a
driver here: both paths are given). On the known-outcome store of tests/fixtures_store.py
(write_view_store): clicking a cell shows the store's program, two settings show their diff and
the paired counts the page computes from the matrix, sorting by disagreement puts the problem
the fixture makes disagree first, the outcome and axis filters narrow the matrix, and nothing
is requested from outside the folder. On stores written through the store (the paper grid,
several samples per problem, truncated prompts that pass): the page's n, b, c, B - A, p and
detectable difference are `reprogrid compare --json`'s for the same pair. The report's setting
keys open their column. Screenshots at 1400 px stay in the test's temporary folder.

Skipped, with the reason, when Selenium, Chromium or chromedriver is missing."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

import pytest

from orchestrator.analysis.paired import compare_paired
from orchestrator.cli import main
from orchestrator.report.view import modelfiles
from orchestrator.report.view.inspection import problem_samples
from storage.store import Store
from tests.fixtures_store import (
    VIEW_STATES,
    Spec,
    view_program,
    write_grid_store,
    write_setting,
    write_synthetic_store,
    write_view_store,
)

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

logger = logging.getLogger(__name__)

CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None
)
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="Chromium or chromedriver not installed (apt-get install chromium chromium-driver)",
)
WIDTH, HEIGHT = 1400, 1000
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--window-size={WIDTH},{HEIGHT}",
)


def _browser():
    options = Options()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    # Every request the page makes, from the browser's own network events (file:// included).
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_window_size(WIDTH, HEIGHT)
    yield driver
    driver.quit()


browser = pytest.fixture(scope="module")(_browser)


def wait_for(driver, script: str, timeout_s: float = 20.0):
    """Poll a JS expression until it is truthy; its value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = driver.execute_script(f"return {script}")
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for: {script}")


def requests(driver) -> list[str]:
    """The URLs requested since the last call (the browser's Network.requestWillBeSent)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def open_page(driver, url: str, ready: str) -> float:
    driver.get(url)
    wait_for(driver, f"document.body.dataset.ready === {ready!r}")
    return float(driver.execute_script("return window.reprogridView.state.openedMs"))


def folder_of(out: Path, label: str) -> str:
    """The folder of a model (by its label) under data/, from the view's index."""
    text = (out / "data" / "index.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index(",") + 1 : text.rindex(")")])
    return next(g["id"] for g in index["groups"] if g["label"] == label)


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    root = tmp_path_factory.mktemp("view")
    keys = write_view_store(str(root / "store"))  # grid order: own 512, own 2048, t0.8, instruct
    out = root / "view"
    assert main(["view", "--store", str(root / "store"), "--out", str(out)]) == 0
    return root, keys, out, folder_of(out, "tiny")


def cell(driver, task: str, key: str):
    column = driver.find_element(By.CSS_SELECTOR, f'th.key[data-s="{key}"]').get_attribute("data-j")
    return driver.find_element(By.CSS_SELECTOR, f'tr[data-p="{task}"] td[data-j="{column}"]')


def test_click_a_cell_compare_two_settings_sort_and_filter(browser, view):
    root, keys, out, tiny = view
    requests(browser)
    opened = open_page(browser, (out / "index.html").as_uri(), tiny)
    logger.info(f"problems view of 4 settings x 6 problems opened in {opened:.0f} ms")
    rows = browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")
    assert [r.get_attribute("data-p") for r in rows] == [f"Python/{i}" for i in range(6)]

    # a cell: own greedy 2048 on Python/3 passed; instruct on Python/3 could not run
    store = Store(str(root / "store"))
    for key, state, error in ((keys[1], "passed", "no error"), (keys[3], "error", "SyntaxError")):
        cell(browser, "Python/3", key).click()
        program = wait_for(browser, "document.getElementById('detail-program')?.textContent")
        (sample,) = problem_samples(store, key, "Python/3")
        assert program == sample.program
        assert browser.find_element(By.ID, "detail-state").text.startswith(state)
        assert error in browser.find_element(By.ID, "detail-error").text
        prompt = browser.find_element(By.ID, "detail-prompt").get_attribute("textContent")
        assert prompt == sample.prompt

    # two settings: own greedy 2048 (A) and own t0.8 (B), on the clicked problem Python/3
    cell(browser, "Python/3", keys[1]).click()
    Select(browser.find_element(By.ID, "cmp-a")).select_by_value(keys[1])
    Select(browser.find_element(By.ID, "cmp-b")).select_by_value(keys[2])
    wait_for(browser, "document.getElementById('pair-b')")
    passed = {
        k: [s[j] == "P" for s in VIEW_STATES] for k, j in zip(keys, (2, 0, 3, 1), strict=True)
    }
    want = compare_paired(passed[keys[1]], passed[keys[2]])
    assert (want.b, want.c) == (3, 1)
    assert browser.find_element(By.ID, "pair-b").text == "3"
    assert browser.find_element(By.ID, "pair-c").text == "1"
    assert browser.find_element(By.ID, "pair-n").text == "6"
    assert float(browser.find_element(By.ID, "pair-p").get_attribute("data-p")) == want.p_value
    assert browser.find_element(By.ID, "pair-delta").text == f"{want.delta_pp:.2f}"
    # the interval, on request only: the page's own resampling, said so
    assert not browser.find_elements(By.ID, "pair-interval")
    browser.find_element(By.ID, "pair-resample").click()
    interval = wait_for(browser, "document.getElementById('pair-interval')?.textContent")
    low, high = (float(x) for x in interval.strip("[]").split(","))
    assert low <= want.delta_pp <= high
    assert (
        "the page's own resampling: 10000 draws, seed 0"
        in browser.find_element(By.ID, "pair-resampled").text
    )
    deleted = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#diff td.del")]
    added = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#diff td.add")]
    # the fixture's settings 0 (own 2048) and 3 (t0.8) differ in line 2 only
    assert deleted == ["    y = x + 0"] and added == ["    y = x + 3"]
    left = browser.find_elements(By.CSS_SELECTOR, "#diff tr td:nth-child(2)")
    assert "\n".join(e.get_attribute("textContent") for e in left) + "\n" == view_program(3, 0)
    browser.save_screenshot(str(root / "compare.png"))

    # sort by disagreement: Python/2 (solved by half the settings) first
    Select(browser.find_element(By.ID, "sort")).select_by_value("disagreement")
    first = browser.find_element(By.CSS_SELECTOR, "#matrix tbody tr").get_attribute("data-p")
    assert first == "Python/2"
    order = [
        r.get_attribute("data-p")
        for r in browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")
    ]
    assert order == ["Python/2", "Python/3", "Python/4", "Python/5", "Python/0", "Python/1"]

    # filter by outcome: only Python/4 has a timeout
    Select(browser.find_element(By.ID, "outcome")).select_by_value("T")
    rows = browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")
    assert [r.get_attribute("data-p") for r in rows] == ["Python/4"]
    Select(browser.find_element(By.ID, "outcome")).select_by_value("")

    # filter by an axis value: without the instruct template, three columns remain
    browser.find_element(By.CSS_SELECTOR, 'input[data-axis="template"][value="instruct"]').click()
    shown = [e.get_attribute("data-s") for e in browser.find_elements(By.CSS_SELECTOR, "th.key")]
    assert shown == keys[:3]
    # and Python/3 is now agreed on less: P (own 2048) against L, F
    assert browser.find_element(By.ID, "count").text == "6 of 6 problems, 3 of 4 settings"

    # nothing was requested from outside the folder
    urls = requests(browser)
    assert len(urls) > 5 and all(u.startswith(out.as_uri() + "/") for u in urls), urls


@pytest.fixture
def fresh_browser():
    """A browser of its own: files another test loaded would come from its memory cache,
    without a network event to count."""
    yield from _browser()


def test_opening_loads_only_the_first_page(fresh_browser, view):
    root, _, out, tiny = view
    browser = fresh_browser
    open_page(browser, (out / "index.html").as_uri(), tiny)
    relative = {u[len(out.as_uri()) + 1 :] for u in requests(browser)}
    assert relative == {
        "index.html",
        "problems.js",
        "problems.css",
        "data/index.js",
        f"data/{tiny}/matrix.js",
    }
    browser.find_element(By.CSS_SELECTOR, 'tr[data-p="Python/1"] td.c').click()
    wait_for(browser, "document.getElementById('detail-program')")
    loaded = requests(browser)
    # on demand: the file that holds Python/1 (the fixture's six problems share one)
    assert [u[len(out.as_uri()) + 1 :] for u in loaded] == [f"data/{tiny}/p/0.js"]


def test_a_problem_in_a_later_file_shows_its_own_texts(fresh_browser, tmp_path, monkeypatch):
    """Problem files of two problems each: a click on Python/3 loads the file that starts at
    problem 2 and shows Python/3's program (the file's second problem), not problem 2's."""
    keys = write_view_store(str(tmp_path / "store"))
    view = ("view", "--store", str(tmp_path / "store"), "--out")
    monkeypatch.setattr(modelfiles, "PROBLEM_FILE_BYTES", 1)  # one problem a file, to size them
    assert main([*view, str(tmp_path / "sizes")]) == 0
    tiny = folder_of(tmp_path / "sizes", "tiny")
    largest = max(p.stat().st_size for p in (tmp_path / f"sizes/data/{tiny}/p").glob("*.js"))
    # more than any one problem's JSON, less than any two: a file holds two problems
    monkeypatch.setattr(modelfiles, "PROBLEM_FILE_BYTES", largest)
    out = tmp_path / "view"
    assert main([*view, str(out)]) == 0
    starts = sorted(int(p.stem) for p in (out / f"data/{tiny}/p").glob("*.js"))
    assert starts == list(range(0, len(VIEW_STATES), 2))
    browser = fresh_browser
    open_page(browser, (out / "index.html").as_uri(), tiny)
    requests(browser)
    store = Store(str(tmp_path / "store"))
    for task in ("Python/3", "Python/5"):
        cell(browser, task, keys[1]).click()
        wait_for(browser, f"document.querySelector('#detail h2')?.textContent.startsWith({task!r})")
        program = browser.find_element(By.ID, "detail-program").get_attribute("textContent")
        (sample,) = problem_samples(store, keys[1], task)
        assert program == sample.program
    loaded = [u[len(out.as_uri()) + 1 :] for u in requests(browser)]
    assert loaded == [f"data/{tiny}/p/2.js", f"data/{tiny}/p/4.js"]


def compare_test(capsys, store: str, a: str, b: str) -> dict:
    """`reprogrid compare --json A B`'s test: B against A."""
    capsys.readouterr()
    assert main(["compare", "--store", store, a, b, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["test"]


def page_pair(driver, a: str, b: str) -> dict:
    """Choose A and B in the page; its paired counts as drawn (the exact values the page
    computed are in data attributes, the text rounds them)."""
    Select(driver.find_element(By.ID, "cmp-a")).select_by_value(a)
    Select(driver.find_element(By.ID, "cmp-b")).select_by_value(b)
    wait_for(
        driver,
        f"document.getElementById('pair-stats')?.dataset.b === {b!r} && "
        f"document.getElementById('pair-stats')?.dataset.a === {a!r}",
    )
    shown = {n: driver.find_element(By.ID, f"pair-{n}").text for n in ("n", "b", "c", "delta")}
    delta = driver.find_element(By.ID, "pair-delta").get_attribute("data-pp")
    mdd = driver.find_element(By.ID, "pair-mdd").get_attribute("data-pp")
    p = driver.find_elements(By.ID, "pair-p")
    return {
        "n": int(shown["n"]),
        "b": int(shown["b"]),
        "c": int(shown["c"]),
        "delta_text": shown["delta"],
        "delta_pp": float(delta),
        "mdd_pp": float(mdd),
        "p_value": float(p[0].get_attribute("data-p")) if p else None,
    }


def test_the_pages_paired_counts_are_compares_on_the_paper_grid(browser, tmp_path, capsys):
    """One sample per problem: n, b, c, B - A, the exact McNemar p and the detectable
    difference the page computes from the matrix equal `reprogrid compare --json` on the same
    pair (A and B as chosen, either order), for pairs along every axis."""
    store = str(tmp_path / "store")
    specs = write_grid_store(store)
    out = tmp_path / "view"
    assert main(["view", "--store", store, "--out", str(out)]) == 0
    key = {
        (s.model, s.template, s.decoding, s.max_length, s.precision): k for k, s in specs.items()
    }
    model = "deepseekcoder-1.3b-base"
    base = key[model, "own", "greedy", 2048, "bf16"]
    others = [
        key[model, "instruct", "greedy", 2048, "bf16"],
        key[model, "own", "t0.8", 2048, "bf16"],
        key[model, "own", "greedy", 512, "bf16"],
        key[model, "own", "greedy", 2048, "int4"],
        key[model, "instruct", "t0.2", 512, "fp32"],
    ]
    open_page(browser, (out / "index.html").as_uri(), folder_of(out, model))
    for a, b in [*((base, o) for o in others), (others[3], base), (others[1], others[4])]:
        got, want = page_pair(browser, a, b), compare_test(capsys, store, a, b)
        assert want["method"] == "exact McNemar"
        assert (got["n"], got["b"], got["c"]) == (want["n"], want["b"], want["c"]), (a, b)
        assert got["p_value"] == want["p_value"]  # the same double
        assert got["delta_pp"] == pytest.approx(want["delta_pp"], rel=1e-12, abs=1e-12)
        assert got["delta_text"] == f"{want['delta_pp']:.2f}"
        assert got["mdd_pp"] == pytest.approx(want["mdd_pp"], rel=1e-12)


def test_the_pages_counts_with_samples_and_truncated_passes_are_compares(browser, tmp_path, capsys):
    """Several samples per problem (each problem's pass rate), and truncated prompts whose
    samples passed (R cells that count as passes): the page's n, b, c, B - A and detectable
    difference equal `compare`'s; its sign-flip p, on request, too (both enumerate every sign
    pattern of the ten problems); its interval is its own resampling."""
    store = str(tmp_path / "store")
    model = "deepseekcoder-1.3b-base"
    specs = [
        Spec(model, "own", "greedy", 2048, "bf16", passes=5, truncated=4),
        Spec(model, "own", "greedy", 2048, "fp16", passes=7),
        Spec(model, "own", "t0.8", 2048, "bf16", passes=13, n_samples=3, truncated=5),
        Spec(model, "own", "t0.8", 2048, "fp16", passes=19, n_samples=3),
    ]
    keys = [write_setting(Store(store), spec, n_problems=10) for spec in specs]
    out = tmp_path / "view"
    assert main(["view", "--store", store, "--out", str(out)]) == 0
    open_page(browser, (out / "index.html").as_uri(), folder_of(out, model))
    passing = browser.execute_script("return window.reprogridView.state.group.passing")
    assert passing  # the fixture's truncated prompts pass somewhere: R cells that count
    for a, b in [(keys[0], keys[1]), (keys[2], keys[3]), (keys[0], keys[3])]:
        got, want = page_pair(browser, a, b), compare_test(capsys, store, a, b)
        assert (got["n"], got["b"], got["c"]) == (want["n"], want["b"], want["c"]), (a, b)
        assert got["delta_pp"] == pytest.approx(want["delta_pp"], rel=1e-9, abs=1e-9)
        assert got["mdd_pp"] == pytest.approx(want["mdd_pp"], rel=1e-9)
        if want["method"] == "exact McNemar":
            assert got["p_value"] == want["p_value"]
            continue
        assert got["p_value"] is None  # a resampled p is computed on request only
        browser.find_element(By.ID, "pair-resample").click()
        p = wait_for(browser, "document.getElementById('pair-perm-p')?.dataset.p")
        assert want["exhaustive"] and float(p) == pytest.approx(want["p_value"], rel=1e-12)
        interval = browser.find_element(By.ID, "pair-interval").text
        low, high = (float(x) for x in interval.strip("[]").split(","))
        assert low <= high
    browser.save_screenshot(str(tmp_path / "samples.png"))


def test_a_report_setting_key_opens_its_column(browser, tmp_path):
    store = tmp_path / "store"
    write_synthetic_store(str(store))
    out = tmp_path / "report"
    args = ["report", "--store", str(store), "--out", str(out), "--format", "html"]
    assert main([*args, "--resamples", "200"]) == 0
    browser.get((out / "report.html").as_uri())
    link = browser.find_element(By.CSS_SELECTOR, 'table a[href^="problems/index.html#setting="]')
    key = link.get_attribute("href").split("#setting=", 1)[1]
    assert key.startswith(link.text.replace("\n", ""))  # the 12 characters shown
    link.click()
    wait_for(browser, "document.body.dataset.ready")
    focused = browser.find_element(By.CSS_SELECTOR, "th.key.focus")
    assert focused.get_attribute("data-s") == key
    assert (
        Select(browser.find_element(By.ID, "cmp-a")).first_selected_option.get_attribute("value")
        == key
    )


def test_a_60_setting_model_at_1400_px(browser, tmp_path):
    """The paper grid (60 settings x 164 problems per model): every column fits 1400 px, and
    the time the page took to draw is printed (measured, never asserted)."""
    store = tmp_path / "store"
    write_grid_store(str(store))
    out = tmp_path / "view"
    assert main(["view", "--store", str(store), "--out", str(out), "--resamples", "200"]) == 0
    first = folder_of(out, "deepseekcoder-1.3b-base")
    opened = open_page(browser, (out / "index.html").as_uri(), first)
    logger.info(f"problems view of 60 settings x 164 problems opened in {opened:.0f} ms")
    assert len(browser.find_elements(By.CSS_SELECTOR, "th.key")) == 60
    assert len(browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")) == 164
    page = browser.execute_script("return document.documentElement.scrollWidth")
    assert page <= browser.execute_script("return document.documentElement.clientWidth")
    table = browser.find_element(By.ID, "matrix").rect
    assert table["x"] + table["width"] <= WIDTH
    Select(browser.find_element(By.ID, "sort")).select_by_value("disagreement")
    browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr td.c")[7].click()
    wait_for(browser, "document.getElementById('detail-program')")
    Select(browser.find_element(By.ID, "cmp-b")).select_by_index(31)
    browser.find_element(By.CSS_SELECTOR, "th.key").click()
    wait_for(browser, "document.getElementById('pair-b')")
    shot = Path(tmp_path) / "problems-60.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_a_sample_the_harness_slicing_cut_says_so_in_its_panel(browser, tmp_path):
    """A sample flagged `decode_mismatch` (the harness's prompt slicing cut its continuation):
    its panel says so and points to the docs; a sample of the same setting without the flag
    does not."""
    keys = write_view_store(str(tmp_path / "store"))
    store = Store(str(tmp_path / "store"))
    rows = store.read_shard("generations", keys[1]).to_pylist()
    cut = [r | {"decode_mismatch": r["task_id"] == "Python/3"} for r in rows]
    store.write_rows("generations", keys[1], cut)
    out = tmp_path / "view"
    assert main(["view", "--store", str(tmp_path / "store"), "--out", str(out)]) == 0
    open_page(browser, (out / "index.html").as_uri(), folder_of(out, "tiny"))
    cell(browser, "Python/3", keys[1]).click()
    note = wait_for(browser, "document.getElementById('detail-mismatch')?.textContent")
    assert note.startswith("Decode mismatch: the harness's prompt slicing cut this continuation")
    assert 'docs/report.md, "Decode mismatch"' in note.replace("\u201c", '"').replace("\u201d", '"')
    browser.save_screenshot(str(tmp_path / "decode-mismatch.png"))
    cell(browser, "Python/2", keys[1]).click()
    wait_for(browser, "document.querySelector('#detail h2')?.textContent.startsWith('Python/2')")
    assert browser.find_element(By.ID, "detail-program")  # the panel is drawn, without the note
    assert not browser.find_elements(By.ID, "detail-mismatch")
