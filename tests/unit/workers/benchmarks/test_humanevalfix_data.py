from __future__ import annotations

import json

import pytest

from workers.benchmarks.humanevalfix import data
from workers.benchmarks.humanevalfix.data import DatasetError, load_hub, load_jsonl


def test_local_file_has_164_problems_in_order_and_a_stable_hash(problem_set, shared_data):
    assert [p.task_id for p in problem_set.problems] == [f"Python/{i}" for i in range(164)]
    assert load_jsonl(shared_data / "humanevalpack-python.jsonl").sha256 == problem_set.sha256
    assert all(p.test.rstrip().endswith(f"check({p.entry_point})") for p in problem_set.problems)


def test_hub_loading_downloads_the_raw_jsonl_at_the_pinned_revision(
    monkeypatch, shared_data, problem_set
):
    calls = []

    def fake_download(**kwargs):
        calls.append(kwargs)
        return str(shared_data / "humanevalpack-python.jsonl")

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    loaded = load_hub(revision="abc123")
    assert calls == [
        {
            "repo_id": "bigcode/humanevalpack",
            "repo_type": "dataset",
            "filename": "data/python/data/humanevalpack.jsonl",
            "revision": "abc123",
            "cache_dir": None,
        }
    ]
    assert loaded.sha256 == problem_set.sha256
    assert loaded.source == "hf://bigcode/humanevalpack@abc123/data/python/data/humanevalpack.jsonl"


def test_missing_import_fields_are_filled_like_the_loading_script(tmp_path, shared_data):
    rows = [json.loads(line) for line in (shared_data / "humanevalpack-python.jsonl").open()][:2]
    for row in rows:
        del row["import"], row["test_setup"]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len(load_jsonl(path).problems) == 2


@pytest.mark.parametrize(
    ("content", "needle"),
    [("{not json\n", "invalid JSON"), ('{"task_id": "x"}\n', "lacks field"), ("", "no problems")],
)
def test_bad_files_are_named(tmp_path, content, needle):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError, match=needle):
        load_jsonl(path)


def test_a_missing_file_says_how_to_point_at_the_data(tmp_path):
    with pytest.raises(DatasetError, match="REPROGRID_DATA_DIR"):
        load_jsonl(tmp_path / "nope.jsonl")
    assert data.HUB_REPO_ID == "bigcode/humanevalpack"
