"""`reprogrid show`, flag by flag, on the problems-view store whose every sample is known
(tests/fixtures_store.py, write_view_store); and `reprogrid view`'s output folder."""

from __future__ import annotations

import json

import pytest

from orchestrator.cli import main
from tests.fixtures_store import VIEW_ERRORS, view_program, view_prompt, write_view_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("show") / "store"
    keys = write_view_store(str(root))  # grid order: own 512, own 2048, own t0.8, instruct
    return str(root), keys


def show(capsys, *args) -> tuple[int, str, str]:
    code = main(["show", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_show_prints_prompt_continuation_program_outcome_and_error(store, capsys):
    root, keys = store
    # instruct (VIEW_SETTINGS[1]) on Python/3 is an error (state E)
    code, out, _ = show(capsys, "--store", root, "--setting", keys[3], "--problem", "Python/3")
    assert code == 0
    assert "outcome  error" in out
    assert f"error    {': '.join(VIEW_ERRORS['E'])}" in out
    assert view_prompt(3, "instruct").rstrip("\n") in out
    assert "Here is the fix:\n```python" in out
    assert out.rstrip("\n").endswith(view_program(3, 1).rstrip("\n"))


def test_setting_by_prefix_and_the_length_limit_state(store, capsys):
    root, keys = store
    code, out, _ = show(capsys, "--store", root, "--setting", keys[0][:8], "--problem", "Python/3")
    assert code == 0
    assert f"setting  {keys[0][:12]}" in out
    assert "outcome  length_limit (stored outcome error)  [hit the length limit]" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--setting", "zz", "--problem", "Python/0"], "no setting of store"),
        (["--setting", "", "--problem", "Python/0"], "is ambiguous"),
        (["--setting", "KEY", "--problem", "Python/33"], "no sample of problem 'Python/33'"),
        (["--setting", "KEY", "--problem", "Python/0", "--sample", "3"], "no sample 3"),
        (["--setting", "KEY", "--problem", "Python/0", "--diff", "zz"], "no setting of store"),
    ],
)
def test_bad_values_are_named(store, capsys, args, message):
    root, keys = store
    args = [keys[0] if a == "KEY" else a for a in args]
    code, out, err = show(capsys, "--store", root, *args)
    assert code == 2 and out == ""
    assert message in err


def test_a_missing_store_is_an_error(tmp_path, capsys):
    code, _, err = show(
        capsys, "--store", str(tmp_path / "nope"), "--setting", "a", "--problem", "x"
    )
    assert code == 2 and "does not exist" in err


def test_sample_picks_the_sample(store, capsys):
    root, keys = store
    code, out, _ = show(
        capsys, "--store", root, "--setting", keys[1], "--problem", "Python/2", "--sample", "0"
    )
    assert code == 0 and "problem  Python/2  sample 0" in out and "outcome  passed" in out


def test_diff_is_a_unified_diff_of_the_two_programs(store, capsys):
    root, keys = store
    code, out, _ = show(
        capsys, "--store", root, "--setting", keys[1], "--problem", "Python/2", "--diff", keys[3]
    )
    assert code == 0
    diff = out.split("--- diff of the programs ---\n", 1)[1]
    assert f"--- {keys[1][:12]} Python/2 sample 0" in diff
    assert f"+++ {keys[3][:12]} Python/2 sample 0" in diff
    # own greedy 2048 is setting 0 of the fixture, instruct setting 1: only line 2 differs
    assert "\n-    y = x + 0\n+    y = x + 1\n" in diff
    lines = diff.splitlines()
    assert [x for x in lines if x.startswith("-") and not x.startswith("---")] == ["-    y = x + 0"]
    assert [x for x in lines if x.startswith("+") and not x.startswith("+++")] == ["+    y = x + 1"]
    assert "outcome  failed" in out  # instruct fails Python/2


def test_json_holds_the_sample_and_with_diff_the_other(store, capsys):
    root, keys = store
    code, out, _ = show(
        capsys, "--store", root, "--setting", keys[2], "--problem", "Python/4", "--json"
    )
    assert code == 0
    got = json.loads(out)
    assert set(got) == {"sample"}
    sample = got["sample"]
    assert sample["state"] == "passed" and sample["outcome"] == "passed"
    assert sample["program"] == view_program(4, 3)
    assert sample["setting"]["decoding"] == "t0.8" and sample["setting"]["setting_key"] == keys[2]
    code, out, _ = show(
        capsys,
        "--store",
        root,
        "--setting",
        keys[1],
        "--problem",
        "Python/4",
        "--diff",
        keys[0],
        "--json",
    )
    got = json.loads(out)
    assert got["sample"]["state"] == "failed" and got["other"]["state"] == "truncated_prompt"
    assert got["other"]["prompt_truncated"] is True
    assert got["diff"].startswith(f"--- {keys[1][:12]} Python/4 sample 0\n")


def test_view_writes_the_page_and_its_data(store, tmp_path, capsys):
    root, keys = store
    out = tmp_path / "view"
    assert main(["view", "--store", root, "--out", str(out), "--resamples", "50"]) == 0
    printed = capsys.readouterr().out
    assert "2 model(s), 6 setting(s), 2 problem file(s); 2 model(s) built" in printed
    for name in ("index.html", "problems.js", "problems.css", "data/index.js"):
        assert (out / name).is_file(), name
    index = (out / "data/index.js").read_text(encoding="utf-8")
    assert all(k in index for k in keys)
    assert '"n_resamples":50' in index  # what the page resamples with, on request
    assert not list(out.rglob("pairs.js"))  # no pair is computed in advance
