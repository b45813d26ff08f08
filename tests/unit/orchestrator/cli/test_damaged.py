"""A damaged file never vanishes from an answer (issue 32): `report`, `compare`, `view`, `show`
and `export` check the files they read before they answer. A store with a damaged one is
refused (exit 1, each file named, `reprogrid verify --fix` the way out); with --skip-damaged
the settings it holds are left out, and named (the report's first lines and notes, report.json,
the printed notes, an export's left_out.json or experiment tags). One test per kind of damaged
file: a settings, generations, executions or scores shard, and a pack; all through the command
line on a store of six settings (two models, three settings each)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.cli import main
from storage.compact import PackPolicy, compact
from storage.store import Store
from tests.fixtures_store import BASE, INST, Spec, write_setting
from tests.unit.storage.damage import garbage_in_data

SPECS = tuple(
    Spec(model, template, "greedy", 2048, precision, passes)
    for model, offset in ((BASE, 0), (INST, 20))
    for template, precision, passes in (
        ("own", "bf16", 30 + offset),
        ("instruct", "bf16", 24 + offset),
        ("own", "fp16", 31 + offset),
    )
)
FAST = ("--resamples", "200")  # the numbers are not what these tests check


@pytest.fixture
def store(tmp_path) -> tuple[str, list[str]]:
    root = tmp_path / "store"
    keys = [write_setting(Store(str(root)), spec) for spec in SPECS]
    return str(root), keys


def damage(path: Path) -> str:
    """Overwrite bytes in the middle of a file's data pages (its size unchanged); its name as
    `<table>/<file>`."""
    path.write_bytes(garbage_in_data(path.read_bytes(), n=40))
    return f"{path.parent.name}/{path.name}"


def shard(root: str, table: str, key: str) -> Path:
    return Path(root, table, f"{key}.parquet")


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_refused(code: int, err: str, *files: str, skippable: bool = True) -> None:
    assert code == 1, err
    for file in files:
        assert file in err
    assert "reprogrid verify --fix" in err
    assert ("--skip-damaged" in err) is skippable


def report(capsys, root: str, out: Path, *more: str) -> tuple[int, str, str]:
    return cli(capsys, "report", "--store", root, "--out", str(out), *FAST, *more)


def grid_keys(out: Path) -> set[str]:
    document = json.loads((out / "report.json").read_text())
    return {row["setting_key"] for row in document["tables"]["grid"]["rows"]}


def assert_named_first(out: Path, stdout: str, keys: list[str], file: str) -> None:
    """The report names each left-out setting before any table, first among its notes, in
    report.json and in the printed notes."""
    head = (out / "report.md").read_text().split("\n## ", 1)[0]
    document = json.loads((out / "report.json").read_text())
    for key in keys:
        line = f"left out setting {key[:12]}"
        assert line in head and file in head
        assert any(line in n for n in document["left_out"])
        assert any(line in n for n in document["notes"][: len(keys)])
        assert f"note: {line}" in stdout


def test_a_damaged_settings_shard_is_refused_or_its_setting_named(store, tmp_path, capsys):
    root, keys = store
    file = damage(shard(root, "settings", keys[1]))
    out = tmp_path / "report"
    code, _, err = report(capsys, root, out, "--format", "md,json")
    assert_refused(code, err, file)
    assert not out.exists()  # refused before any file is written

    code, stdout, err = report(capsys, root, out, "--format", "md,json", "--skip-damaged")
    assert code == 0, err
    assert grid_keys(out) == set(keys) - {keys[1]}
    assert_named_first(out, stdout, [keys[1]], file)


def test_a_damaged_generations_shard_stops_view_and_show(store, tmp_path, capsys):
    root, keys = store
    file = damage(shard(root, "generations", keys[2]))
    view = tmp_path / "view"
    code, _, err = cli(capsys, "view", "--store", root, "--out", str(view))
    assert_refused(code, err, file)

    code, stdout, err = cli(capsys, "view", "--store", root, "--out", str(view), "--skip-damaged")
    assert code == 0, err
    assert f"note: left out setting {keys[2][:12]}: damaged {file}" in stdout
    index = (view / "data" / "index.js").read_text()
    assert keys[2] not in index and all(k in index for k in keys if k != keys[2])

    # `show` reads the settings it shows: the one asked for cannot be left out
    asked = ("show", "--store", root, "--problem", "Python/0")
    code, _, err = cli(capsys, *asked, "--setting", keys[2], "--skip-damaged")
    assert_refused(code, err, file, skippable=False)
    code, _, err = cli(capsys, *asked, "--setting", keys[0], "--diff", keys[2])
    assert_refused(code, err, file)
    code, stdout, err = cli(
        capsys, *asked, "--setting", keys[0], "--diff", keys[2], "--skip-damaged"
    )
    assert code == 0, err
    assert f"note: left out setting {keys[2][:12]}" in stdout
    assert "--- diff of the programs ---" not in stdout
    code, stdout, err = cli(capsys, *asked, "--setting", keys[0], "--diff", keys[2], "--json")
    assert_refused(code, err, file)
    code, stdout, err = cli(
        capsys, *asked, "--setting", keys[0], "--diff", keys[2], "--skip-damaged", "--json"
    )
    assert code == 0, err
    shown = json.loads(stdout)
    assert set(shown) == {"sample", "left_out"} and keys[2][:12] in shown["left_out"][0]
    # a report with the problems view reads the generations too; one without does not
    code, _, err = report(capsys, root, tmp_path / "html", "--format", "html")
    assert_refused(code, err, file)
    code, stdout, err = report(capsys, root, tmp_path / "md", "--format", "md,json")
    assert code == 0 and "left out" not in stdout, err
    assert grid_keys(tmp_path / "md") == set(keys)


def test_a_damaged_file_of_a_built_model_is_found_when_its_model_is_built_again(
    store, tmp_path, capsys
):
    """A model's folder of the view is reused only while every file it was built from is the
    one listed then (name, size, mtime): a file damaged since is another file, its model is
    built again, and its files are checked first: refused, or its setting left out and
    named, and the model's folder without it."""
    root, keys = store
    view = ("view", "--store", root, "--out", str(tmp_path / "view"))
    code, stdout, err = cli(capsys, *view)
    assert code == 0 and "2 model(s) built" in stdout, err
    file = damage(shard(root, "generations", keys[2]))
    code, _, err = cli(capsys, *view)
    assert_refused(code, err, file)
    code, stdout, err = cli(capsys, *view, "--skip-damaged")
    assert code == 0, err
    assert f"note: left out setting {keys[2][:12]}: damaged {file}" in stdout
    assert "1 model(s) built, 1 unchanged" in stdout  # the other model's folder is reused
    index = (tmp_path / "view" / "data" / "index.js").read_text()
    assert keys[2] not in index and all(k in index for k in keys if k != keys[2])


def test_a_reused_models_files_are_not_read_nor_checked(store, tmp_path, capsys):
    """A damage that leaves a file's size and mtime as they were (bytes changed in place, its
    time put back) is not looked for in a model whose folder is reused: the view reads none of
    its files and shows what they held when it was built; `report` still checks its own
    tables whole, and `verify` finds it (docs/report.md, "The problems view")."""
    root, keys = store
    view = ("view", "--store", root, "--out", str(tmp_path / "view"))
    assert cli(capsys, *view)[0] == 0
    path = shard(root, "generations", keys[2])
    stat = path.stat()
    file = damage(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code, stdout, err = cli(capsys, *view)
    assert code == 0 and "0 model(s) built, 2 unchanged" in stdout, err
    assert "left out" not in stdout
    code, _, err = report(capsys, root, tmp_path / "report", "--format", "md")
    assert code == 0, err  # the report reads no generations
    code, stdout, _ = cli(capsys, "verify", "--store", root)
    assert code != 0 and path.name in stdout and file.startswith("generations/")


def test_a_damaged_executions_shard_is_refused_or_its_setting_named(store, tmp_path, capsys):
    root, keys = store
    file = damage(shard(root, "executions", keys[3]))
    out = tmp_path / "report"
    code, _, err = report(capsys, root, out, "--format", "md,json")
    assert_refused(code, err, file)
    code, stdout, err = report(capsys, root, out, "--format", "md,json", "--skip-damaged")
    assert code == 0, err
    assert grid_keys(out) == set(keys) - {keys[3]}  # its score is intact: left out all the same
    assert_named_first(out, stdout, [keys[3]], file)

    pair = ("compare", "--store", root, keys[4], keys[5], *FAST)
    code, _, err = cli(capsys, *pair)
    assert_refused(code, err, file)
    code, stdout, err = cli(capsys, *pair, "--skip-damaged")
    assert code == 0, err
    assert f"note: left out setting {keys[3][:12]}: damaged {file}" in stdout
    code, stdout, err = cli(capsys, *pair, "--skip-damaged", "--json")
    assert code == 0, err
    (line,) = json.loads(stdout)["left_out"]
    assert keys[3][:12] in line and file in line
    # a side named by its key is not left out: refused
    code, _, err = cli(capsys, "compare", "--store", root, keys[3], keys[4], "--skip-damaged")
    assert_refused(code, err, file, skippable=False)


def test_a_damaged_scores_shard_is_refused_or_its_setting_named(store, tmp_path, capsys):
    root, keys = store
    file = damage(shard(root, "scores", keys[0]))
    out = tmp_path / "report"
    code, _, err = report(capsys, root, out, "--format", "md,json,html")
    assert_refused(code, err, file)
    code, stdout, err = report(capsys, root, out, "--format", "md,json,html", "--skip-damaged")
    assert code == 0, err
    assert grid_keys(out) == set(keys) - {keys[0]}
    assert_named_first(out, stdout, [keys[0]], file)
    head = (out / "report.html").read_text().split('id="answers"', 1)[0]
    assert f"left out setting {keys[0][:12]}" in head and file in head

    eee = tmp_path / "eee"
    export = ("export", "--store", root, "--format", "eee", "--out", str(eee), "--no-literature")
    code, _, err = cli(capsys, *export)
    assert_refused(code, err, file)
    assert not eee.exists()
    code, stdout, err = cli(capsys, *export, "--skip-damaged")
    assert code == 0, err
    assert f"note: left out setting {keys[0][:12]}" in stdout
    left_out = json.loads((eee / "left_out.json").read_text())
    assert left_out["settings"] == {keys[0]: [file]}
    records = [p.read_text() for p in (eee / "scores").rglob("*.json")]
    assert len(records) == len(keys) - 1 and not any(keys[0] in r for r in records)


def test_a_damaged_pack_leaves_out_every_setting_it_holds(store, tmp_path, capsys):
    root, keys = store
    writer = Store(root)
    with writer.writer_lock():
        compact(writer, PackPolicy(max_members=3))  # two packs of three settings
    records = Store(root).manifest().packs_of("executions")
    assert len(records) == 2
    held = {m.key for m in records[0].members}
    file = damage(Path(root, "executions", records[0].file))  # its size unchanged
    out = tmp_path / "report"
    code, _, err = report(capsys, root, out, "--format", "md,json")
    assert_refused(code, err, file)
    code, stdout, err = report(capsys, root, out, "--format", "md,json", "--skip-damaged")
    assert code == 0, err
    left = set(keys) - grid_keys(out)
    assert len(left) == 3 and left <= held
    assert_named_first(out, stdout, sorted(left), file)


def test_an_mlflow_export_names_what_it_left_out_in_the_experiment(
    store, tmp_path, capsys, monkeypatch
):
    tracking = pytest.importorskip("mlflow.tracking", reason="mlflow not installed")
    # MLflow 3 keeps its file store in maintenance mode and refuses it unless told otherwise.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    root, keys = store
    file = damage(shard(root, "scores", keys[4]))
    uri = (tmp_path / "mlruns").as_uri()
    export = ("export", "--store", root, "--format", "mlflow", "--tracking-uri", uri)
    code, _, err = cli(capsys, *export, "--experiment", "damaged")
    assert_refused(code, err, file)
    code, stdout, err = cli(capsys, *export, "--experiment", "damaged", "--skip-damaged")
    assert code == 0, err
    assert f"note: left out setting {keys[4][:12]}" in stdout
    client = tracking.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("damaged")
    tags = {k: v for k, v in experiment.tags.items() if k.startswith("reprogrid.left_out.")}
    assert list(tags) == [f"reprogrid.left_out.{keys[4]}"] and file in tags[list(tags)[0]]
    runs = client.search_runs([experiment.experiment_id])
    assert {r.data.tags["reprogrid.setting_key"] for r in runs} == set(keys) - {keys[4]}
