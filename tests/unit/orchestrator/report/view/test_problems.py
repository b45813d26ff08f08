"""The problems view's data (orchestrator/report/view/problems.py, modelfiles.py, inspection.py):
cell states, disagreement, the grid's order, the passes the cells do not show, texts stored
once, and the first page's size budget for an 11-model x 60-setting store."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging

import numpy as np
import pytest

from orchestrator.report.view.folder import ViewOptions, first_page, write_view
from orchestrator.report.view.inspection import CellState, cell_state, problem_samples
from orchestrator.report.view.modelfiles import script
from orchestrator.report.view.plan import groups_of
from orchestrator.report.view.problems import disagreement, matrix
from storage.store import Store
from tests.fixtures_store import VIEW_STATES, Spec, write_setting, write_view_store

logger = logging.getLogger(__name__)

FIRST_PAGE_BUDGET = 2_000_000  # bytes: what opening the page may load (the budget)


@pytest.mark.parametrize(
    ("outcome", "truncated", "hit", "state"),
    [
        ("passed", False, False, CellState.PASSED),
        ("passed", False, True, CellState.PASSED),  # a pass within the limit's last token
        ("failed", False, False, CellState.FAILED),
        ("failed", False, True, CellState.LENGTH_LIMIT),
        ("error", False, True, CellState.LENGTH_LIMIT),
        ("error", False, False, CellState.ERROR),
        ("timeout", False, False, CellState.TIMEOUT),
        ("failed", True, True, CellState.TRUNCATED),
        ("passed", True, False, CellState.TRUNCATED),
        (None, False, False, CellState.NOT_EXECUTED),
        ("toolchain_missing", False, False, CellState.TOOLCHAIN),
    ],
)
def test_cell_state(outcome, truncated, hit, state):
    assert cell_state(outcome, truncated, hit) is state


def test_an_unknown_outcome_is_named():
    with pytest.raises(ValueError, match="unknown execution outcome 'exploded'; outcomes: passed"):
        cell_state("exploded", False, False)


def test_disagreement_is_the_variance_of_the_pass_rates():
    assert disagreement([1.0, 1.0, 1.0]) == 0
    assert disagreement([1.0, 0.0, 1.0, 0.0]) == pytest.approx(0.25)
    assert disagreement([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.1875)
    assert disagreement([0.5, 0.5]) == 0  # two settings that each solve half agree
    assert disagreement([None, 1.0]) == 0  # one setting holds the problem: nothing to compare


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    root = tmp_path_factory.mktemp("problems")
    keys = write_view_store(str(root / "store"))
    summary = write_view(Store(str(root / "store")), ViewOptions(root / "view"))
    groups = [g["id"] for g in payload(root / "view/data/index.js")["groups"]]
    return root, keys, summary, groups


def payload(path) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("reprogridView.receive(")
    return json.loads(text[text.index(",") + 1 : text.rindex(")")])


def test_matrix_is_in_grid_order_with_the_fixtures_states(view):
    root, keys, _, groups = view
    grid = payload(root / f"view/data/{groups[0]}/matrix.js")
    assert grid["id"] == groups[0] and grid["model"] == "tiny"
    assert [s["key"] for s in grid["settings"]] == keys
    assert grid["problems"] == [f"Python/{i}" for i in range(len(VIEW_STATES))]
    # keys are own 512, own 2048, own t0.8, instruct: the fixture's settings 2, 0, 3, 1
    assert grid["cells"] == [",".join(s[j] for j in (2, 0, 3, 1)) for s in VIEW_STATES]
    assert grid["axes"] == ["template", "decoding", "max_length"]
    assert grid["disagreement"][2] == max(grid["disagreement"]) == 0.25
    assert [s["pass_pct"] for s in grid["settings"]] == [50.0, 66.67, 33.33, 33.33]
    assert grid["passing"] == []  # every passing sample shows P


def test_the_matrix_lists_the_passes_its_cells_do_not_show(tmp_path):
    """A truncated prompt's sample shows R whether it passed or not; the cells whose passing
    samples are not their P codes are listed, so the page counts what `compare` counts."""
    store = Store(str(tmp_path / "store"))
    spec = Spec("tiny", "own", "greedy", 2048, "bf16", passes=5, truncated=4)
    key = write_setting(store, spec, n_problems=8)
    write_view(store, ViewOptions(tmp_path / "view"))
    (group,) = payload(tmp_path / "view/data/index.js")["groups"]
    grid = payload(tmp_path / f"view/data/{group['id']}/matrix.js")
    passed = {r["task_id"]: r["passed"] for r in store.read_shard("executions", key).to_pylist()}
    hidden = [
        [i, 0, 1]
        for i, task in enumerate(grid["problems"])
        if grid["cells"][i] == "R" and passed[task]
    ]
    assert grid["passing"] == hidden
    assert sum(c == "R" for c in grid["cells"]) == 4 and hidden  # the fixture's seed passes one


def problem(root, group: str, i: int) -> dict:
    """Problem i of a group, from the problem file that holds it (the matrix lists them)."""
    starts = payload(root / f"view/data/{group}/matrix.js")["problem_files"]
    first = max(s for s in starts if s <= i)
    file = payload(root / f"view/data/{group}/p/{first}.js")
    assert file["first"] == first
    return file["problems"][i - first]


def test_texts_are_stored_once_per_problem(view):
    root, keys, _, groups = view
    texts = problem(root, groups[0], 3)
    assert texts["task_id"] == "Python/3"
    shown = {keys[r[0]]: dict(zip(texts["fields"], r, strict=True)) for r in texts["samples"]}
    assert set(shown) == set(keys) and len(shown) == len(texts["samples"])
    # three own-template settings share one prompt: 2 prompts, 4 programs, 4 continuations
    assert len({s["prompt"] for s in shown.values()}) == 2
    assert len(texts["texts"]) == len(set(texts["texts"]))
    store = Store(str(root / "store"))
    for key in keys:
        (sample,) = problem_samples(store, key, "Python/3")
        assert texts["texts"][shown[key]["program"]] == sample.program
        assert texts["texts"][shown[key]["prompt"]] == sample.prompt
        assert texts["texts"][shown[key]["continuation"]] == sample.continuation
        assert shown[key]["state"] == sample.state.value


def test_the_summary_names_what_the_page_loads_first(view):
    root, keys, summary, groups = view
    assert summary.first_page == (
        "index.html",
        "problems.js",
        "problems.css",
        "data/index.js",
        f"data/{groups[0]}/matrix.js",
    )
    assert summary.first_page_bytes == sum(
        (root / "view" / f).stat().st_size for f in summary.first_page
    )
    files = sorted((root / "view" / "data").glob("*/p/*.js"))
    assert set(keys) <= summary.keys and summary.n_problem_files == len(files) == 2
    # a model's 6 small problems fit in one file; each file holds its problems in order
    for group in groups:
        tasks = payload(root / f"view/data/{group}/matrix.js")["problems"]
        assert [problem(root, group, i)["task_id"] for i in range(len(tasks))] == tasks
    html = (root / "view/index.html").read_text(encoding="utf-8")
    assert "http" not in html and "http" not in (root / "view/problems.js").read_text()


def _big_group(n_settings: int = 60, n_problems: int = 164, seed: int = 0):
    """A paper60-sized model: 2 templates x 3 decodings x 2 lengths x 5 precisions."""
    rng = np.random.default_rng(seed)
    settings = []
    for n, (template, decoding, length, precision) in enumerate(
        itertools.product(
            ("own", "instruct"),
            ("greedy", "t0.2", "t0.8"),
            (512, 2048),
            ("bf16", "fp16", "fp32", "int8", "int4"),
        )
    ):
        settings.append(
            {
                "setting_key": f"{seed:04d}{n:060d}",
                "model_name": f"model-{seed}",
                "benchmark": "humanevalfix",
                "variant": "tests",
                "template": "deepseek" if template == "own" else template,
                "template_kind": template,
                "decoding": decoding,
                "max_length": length,
                "precision": precision,
                "backend": "hf",
                "n_samples": 1,
                "status": "complete",
            }
        )
    assert len(settings) == n_settings
    codes = np.array(list("PFFFELTR"))
    states = {
        (s["setting_key"], f"Python/{p}"): [str(rng.choice(codes))]
        for s in settings
        for p in range(n_problems)
    }
    return settings, states


def test_the_first_page_of_an_11_model_60_setting_store_is_under_2_mb(tmp_path):
    """Deterministic: the bytes the page loads when opened (the page, its script and style,
    the index of all 660 settings, and one model's matrix), for 11 models x 60 settings x 164
    problems. Logged (INFO) so the margin is visible."""
    every, first = [], None
    for seed in range(11):
        settings, states = _big_group(seed=seed)
        every += settings
        if first is None:
            first = script(f"{'0' * 24}/matrix", matrix(settings, states))
    groups = [
        dataclasses.replace(g, id=f"{n:024x}")  # a folder's name: 24 hexadecimal characters
        for n, g in enumerate(groups_of(every, {s["setting_key"] for s in every}))
    ]
    assert len(groups) == 11 and all(len(g.settings) == 60 for g in groups)
    write_view(Store(str(tmp_path / "empty")), ViewOptions(tmp_path / "view"))  # the assets
    index = {
        "store": "results",
        "generated_at": "2026-01-01 00:00 UTC",
        "report": "../report.html",
        "resampling": {"n_resamples": 10000, "confidence": 0.95, "seed": 0},
        "groups": [
            {"id": g.id, "label": g.label, "model": g.model, "n_settings": 60} for g in groups
        ],
        "keys": {s["setting_key"]: g.id for g in groups for s in g.settings},
    }
    sizes = {name: (tmp_path / "view" / name).stat().st_size for name in first_page(groups)[:3]}
    sizes["data/index.js"] = len(script("index", index).encode())
    sizes[f"data/{groups[0].id}/matrix.js"] = len(first.encode())
    total = sum(sizes.values())
    logger.info(f"first page of 11 models x 60 settings x 164 problems: {total} bytes {sizes}")
    assert set(sizes) == set(first_page(groups))
    assert total < FIRST_PAGE_BUDGET
