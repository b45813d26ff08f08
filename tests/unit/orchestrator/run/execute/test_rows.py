"""A setting's provenance over its chunks (orchestrator/run/execute/rows.py): every library,
host, node, device and dtype once, as structured values, whatever earlier rows hold."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from orchestrator.run.execute.rows import kept_provenance, merged_provenance
from orchestrator.run.execute.writer import PROVENANCE_FIELDS
from workers.spec import EngineInfo, SampleRecord, SettingGenerations, WorkerInfo

FIXTURE = Path(__file__).resolve().parents[5] / "tests" / "fixtures" / "store_v5_chunks"
HF = {"transformers": "5.19.0", "torch": "2.13.0+cpu"}


def chunk(index: int, versions=HF, host: str = "h1", device: str = "cpu") -> SettingGenerations:
    info = EngineInfo("hf", dict(versions), device, "float32", "r", "t", None, "</s>", {})
    sample = SampleRecord(f"task/{index}", 0, "p", "c", "c", 3, 1, False, False)
    return SettingGenerations(
        "k", (sample,), info, WorkerInfo(host, f"node-{host}", 1), 1.0, 0.5, 10.0 + index,
        11.0 + index, chunk=index,
    )  # fmt: skip


def merged(*chunks: SettingGenerations, earlier=None) -> dict:
    row = earlier
    for c in chunks:
        row = merged_provenance(row, c, "{}")
    assert row is not None
    return row


def test_six_chunks_of_one_engine_name_each_library_and_host_once():
    row = merged(*(chunk(i) for i in range(6)))
    assert json.loads(row["backend_versions_json"]) == {
        "torch": ["2.13.0+cpu"],
        "transformers": ["5.19.0"],
    }
    assert row["backend_version"] == "torch 2.13.0+cpu, transformers 5.19.0"
    assert (row["hostnames"], row["node_ids"], row["devices"]) == (["h1"], ["node-h1"], ["cpu"])
    assert (row["hostname"], row["device"], row["effective_dtype"]) == ("h1", "cpu", "float32")
    assert row["effective_dtypes"] == ["float32"]
    assert row["generation_s"] == 6.0 and row["n_generated_tokens"] == 6
    assert row["generation_started_at"].timestamp() == 10.0


def test_chunks_on_other_hosts_and_installs_keep_every_value_in_order():
    newer = {**HF, "transformers": "5.20.0"}
    row = merged(chunk(0), chunk(1, newer, "h2", "cuda:A, B"), chunk(2, HF, "h1"))
    assert json.loads(row["backend_versions_json"])["transformers"] == ["5.19.0", "5.20.0"]
    assert row["backend_version"] == "torch 2.13.0+cpu, transformers 5.19.0 / 5.20.0"
    assert row["hostnames"] == ["h1", "h2"]
    # a value holding a comma stays one value in the list
    assert row["devices"] == ["cpu", "cuda:A, B"]


def stored_row() -> dict:
    """The settings row of a three-chunk tiny run written before schema version 6."""
    (path,) = (FIXTURE / "settings").glob("*.parquet")
    (row,) = pq.read_table(path).to_pylist()
    assert row["backend_version"] == ",".join(["transformers 5.19.0, torch 2.13.0+cpu"] * 3)
    return row


def test_a_chunk_after_chunks_stored_before_version_6_names_each_library_once():
    earlier = kept_provenance(stored_row(), PROVENANCE_FIELDS)
    row = merged(chunk(3, host="fixture-host"), earlier=earlier)
    assert json.loads(row["backend_versions_json"]) == {
        "torch": ["2.13.0+cpu"],
        "transformers": ["5.19.0"],
    }
    assert row["backend_version"] == "torch 2.13.0+cpu, transformers 5.19.0"
    assert row["hostnames"] == ["fixture-host"]
    assert row["node_ids"] == [stored_row()["node_id"], "node-fixture-host"]


def test_an_execution_only_resume_keeps_an_old_rows_provenance_structured():
    old = stored_row()
    kept = kept_provenance(old, PROVENANCE_FIELDS)
    assert kept["backend_version"] == "torch 2.13.0+cpu, transformers 5.19.0"
    assert json.loads(kept["backend_versions_json"]) == {
        "torch": ["2.13.0+cpu"],
        "transformers": ["5.19.0"],
    }
    assert (kept["hostnames"], kept["devices"]) == (["fixture-host"], ["cpu"])
    assert kept["tokenizer_sha256"] == old["tokenizer_sha256"]
    # a row without provenance (skipped, queued) gets none
    assert kept_provenance({"status": "skipped"}, PROVENANCE_FIELDS) == {}
