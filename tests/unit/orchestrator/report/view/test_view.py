"""How the problems view is written (orchestrator/report/view/folder.py, plan.py, modelfiles.py):
a model's folder is built once and reused while what it is made of is unchanged; a second view
builds nothing and leaves every file as it was, a model added builds only that model, a
re-executed setting only its model, a model gone has its folder removed, and a view killed
while it builds is built whole by the next one. Batches of models, a batch's executions split
among its models, and no pandas in `view`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.report.view import modelfiles
from orchestrator.report.view.folder import ViewOptions, write_view
from orchestrator.report.view.modelfiles import BUILDING, EXECUTION_COLUMNS, batches
from orchestrator.report.view.plan import Group
from storage.store import Store
from tests.fixtures_store import Spec, write_grid_store, write_setting, write_view_store
from tests.unit.orchestrator.report.view.view_rows import execution, table

REPO = Path(__file__).resolve().parents[5]


def test_batches_keep_groups_whole_and_in_order():
    groups = [
        Group(f"m{i}", f"model{i}", "b", f"model{i}", ({},) * n) for i, n in enumerate([4, 3, 5, 2])
    ]
    assert [[g.id for g in b] for b in batches(groups, size=7)] == [["m0", "m1"], ["m2", "m3"]]
    assert [[g.id for g in b] for b in batches(groups, size=1)] == [["m0"], ["m1"], ["m2"], ["m3"]]


def test_problem_files_hold_consecutive_problems_up_to_the_budget():
    assert modelfiles.problem_files([40, 40, 40, 40, 40], budget=100) == [0, 3]
    assert modelfiles.problem_files([150, 10, 150, 10], budget=100) == [0, 1, 3]  # one at least
    assert modelfiles.problem_files([10] * 164, budget=10**6) == [0]
    assert modelfiles.problem_files([], budget=100) == []


def test_a_batchs_executions_split_among_its_groups_in_the_order_read():
    groups = [
        Group("m0", "a", "humanevalfix", "a", ({"setting_key": "k1"}, {"setting_key": "k3"})),
        Group("m1", "b", "humanevalfix", "b", ({"setting_key": "k2"},)),
        Group("m2", "c", "humanevalfix", "c", ({"setting_key": "k4"},)),  # no rows
    ]
    read = [
        execution(key, f"Python/{i}", 0, "passed" if i % 2 else "failed")
        for i, key in enumerate(["k3", "k2", "k1", "k9", "k3", "k2", "k1"])  # k9: no group's
    ]
    rows_read = table("executions", EXECUTION_COLUMNS, read)
    split = modelfiles.split_executions(rows_read, groups)
    rows = [[(r["setting_key"], r["task_id"]) for r in t.to_pylist()] for t in split]
    assert rows == [
        [("k3", "Python/0"), ("k1", "Python/2"), ("k3", "Python/4"), ("k1", "Python/6")],
        [("k2", "Python/1"), ("k2", "Python/5")],
        [],
    ]
    assert all(t.schema == rows_read.schema for t in split)


# -- the cache ---------------------------------------------------------------------------------


def files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the view but its index: (bytes, mtime_ns) by path."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "index.js"
    }


def index(root: Path) -> dict:
    text = (root / "data" / "index.js").read_text(encoding="utf-8")
    return json.loads(text[text.index(",") + 1 : text.rindex(")")])


def folders(root: Path) -> dict[str, str]:
    """Model label -> its folder's name, from the index."""
    return {g["label"]: g["id"] for g in index(root)["groups"]}


def model_files(root: Path, folder: str) -> dict[str, tuple[bytes, int]]:
    return {k: v for k, v in files(root).items() if k.startswith(f"data/{folder}/")}


def view(store: Store, out: Path):
    return write_view(store, ViewOptions(out, generated_at="then"))


@pytest.fixture
def built(tmp_path) -> tuple[Store, Path, list[str]]:
    """The view store (models tiny and tiny-b) with its view written once."""
    keys = write_view_store(str(tmp_path / "store"))
    store, out = Store(str(tmp_path / "store")), tmp_path / "view"
    summary = view(store, out)
    assert sorted(summary.built) == ["tiny", "tiny-b"]
    return store, out, keys


def test_a_second_view_builds_nothing_and_leaves_every_file_as_it_was(built):
    store, out, _ = built
    before = files(out)
    again = view(store, out)
    assert again.built == () and again.removed == 0
    after = files(out)
    data = {k: v for k, v in after.items() if k.startswith("data/")}
    assert {k: v for k, v in before.items() if k.startswith("data/")} == data
    assert len(data) >= 4  # two models: a matrix and a problem file each


def test_a_model_added_builds_only_that_model(built):
    store, out, _ = built
    before, names = files(out), folders(out)
    write_setting(store, Spec("tiny-c", "own", "greedy", 2048, "bf16", 3), n_problems=6)
    summary = view(store, out)
    assert summary.built == ("tiny-c",)
    after = folders(out)
    assert {k: after[k] for k in names} == names  # the others keep their folders' names
    for label, name in names.items():
        assert model_files(out, name) == {
            k: v for k, v in before.items() if k.startswith(f"data/{name}/")
        }, label


def test_a_re_executed_setting_rebuilds_only_its_model(built):
    store, out, keys = built
    names = folders(out)
    kept = model_files(out, names["tiny-b"])
    rows = store.read_shard("executions", keys[0]).to_pylist()
    passed = [r | {"passed": True, "outcome": "passed"} for r in rows]
    store.write_rows("executions", keys[0], passed)
    summary = view(store, out)
    assert summary.built == ("tiny",) and summary.removed == 1  # tiny's older folder
    now = folders(out)
    assert now["tiny"] != names["tiny"] and now["tiny-b"] == names["tiny-b"]
    assert model_files(out, names["tiny-b"]) == kept
    assert not (out / "data" / names["tiny"]).exists()
    grid = (out / "data" / now["tiny"] / "matrix.js").read_text(encoding="utf-8")
    assert '"P,' in grid  # the first setting's cells are passes now


def test_a_model_no_longer_in_the_store_has_its_folder_removed(built):
    store, out, _ = built
    names = folders(out)
    gone = [k for k, folder in index(out)["keys"].items() if folder == names["tiny-b"]]
    for table_name in ("settings", "generations", "executions", "scores"):
        for key in gone:
            Path(store.shard_path(table_name, key)).unlink(missing_ok=True)
    summary = view(store, out)
    assert summary.built == () and summary.removed == 1 and summary.groups == ("tiny",)
    assert not (out / "data" / names["tiny-b"]).exists()
    assert (out / "data" / names["tiny"] / "matrix.js").is_file()


def test_the_view_folder_keeps_what_is_not_its_own(built):
    """Only the view's own entries of data/ are removed: a model folder's name, one being
    built, an older index's temporary file, an m<i> folder of the layout before."""
    store, out, _ = built
    (out / "data" / "notes.txt").write_text("mine")
    (out / "data" / "m0").mkdir()
    (out / "data" / f"{BUILDING}0123abcd-xyz").mkdir()
    assert view(store, out).removed == 2
    assert (out / "data" / "notes.txt").read_text() == "mine"


KILLED = """
import os, signal, sys
from pathlib import Path
from orchestrator.report.view import modelfiles
from orchestrator.report.view.folder import ViewOptions, write_view
from storage.store import Store

written = []
real = Path.write_text

def write_text(self, *args, **kwargs):
    written.append(self)
    if len(written) == int(sys.argv[3]):  # killed while this file is half written
        real(self, "reprogridView.rece", encoding="utf-8")
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, *args, **kwargs)

Path.write_text = write_text
write_view(Store(sys.argv[1]), ViewOptions(Path(sys.argv[2])))
"""


def test_a_view_killed_while_it_builds_is_built_whole_by_the_next(tmp_path):
    """A `view` process killed (SIGKILL) while it writes its second model's folder: the next
    view reuses the first model's folder, builds the second whole, and removes what the kill
    left; its files equal those of a view written in one go."""
    write_grid_store(str(tmp_path / "store"))  # two models of 60 settings, a few files each
    store, out = Store(str(tmp_path / "store")), tmp_path / "view"
    assert len(view(store, tmp_path / "whole").built) == 2
    first = index(tmp_path / "whole")["groups"][0]["id"]  # built first
    per_model = len(list((tmp_path / "whole" / "data" / first).rglob("*.js")))
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, str(tmp_path / "store"), str(out), str(per_model + 1)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    left = [p.name for p in (out / "data").iterdir()]
    assert len(left) == 2 and any(name.startswith(BUILDING) for name in left), left
    assert not (out / "data" / "index.js").exists()
    summary = view(store, out)
    assert len(summary.built) == 1 and summary.removed == 1  # the half-written folder
    assert (out / "data" / first).is_dir() and per_model >= 2
    whole = {k: v[0] for k, v in files(tmp_path / "whole").items()}
    assert {k: v[0] for k, v in files(out).items()} == whole
    assert index(out) == index(tmp_path / "whole")


WITHOUT_PANDAS = """
import sys
from pathlib import Path
from orchestrator.report.view.folder import ViewOptions, write_view
from storage.store import Store
write_view(Store(sys.argv[1]), ViewOptions(Path(sys.argv[2])))
print(sorted(m for m in sys.modules if m.split(".")[0] == "pandas")[:1])
"""


def test_a_view_imports_no_pandas(tmp_path):
    """pandas costs `view` 0.3 s and 40 MB; pyarrow imports it to build an array from Python
    values or to read one as NumPy."""
    root = tmp_path / "store"
    for precision in ("bf16", "fp32"):
        write_setting(Store(str(root)), Spec("tiny", "own", "greedy", 2048, precision, 80))
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_PANDAS, str(root), str(tmp_path / "view")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert list((tmp_path / "view" / "data").glob("*/p/0.js"))
    assert done.stdout.split("\n")[-2] == "[]"
