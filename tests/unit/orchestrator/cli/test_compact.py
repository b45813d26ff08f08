"""`reprogrid compact`: packs a store's finished shards under the writer lock, says what it did,
and leaves `status` and `verify` answering as before."""

from __future__ import annotations

import json

from orchestrator.cli import main
from storage.layout import is_pack_name
from tests.fixtures_store import write_synthetic_store
from tests.processes import lock_held_elsewhere


def test_compact_packs_the_finished_shards_and_changes_no_answer(capsys, tmp_path):
    write_synthetic_store(str(tmp_path))
    assert main(["status", "--store", str(tmp_path), "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert main(["compact", f"store={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "scores: 12 -> 1 file(s), 12 shard(s) into 1 pack(s)" in out
    assert all(is_pack_name(p.name) for p in (tmp_path / "scores").iterdir())
    assert main(["status", "--store", str(tmp_path), "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after.pop("layout")["packs"] == 3 and before.pop("layout")["packs"] == 0
    assert after == before
    assert main(["verify", "--store", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["compact", "--store", str(tmp_path), "--json"]) == 0  # nothing left to pack
    again = json.loads(capsys.readouterr().out)
    assert all(t["packs_written"] == 0 for t in again["tables"].values())


def test_compact_waits_for_no_other_writer(capsys, tmp_path):
    write_synthetic_store(str(tmp_path))
    with lock_held_elsewhere(tmp_path):
        assert main(["compact", "--store", str(tmp_path)]) == 2
    assert "being written by another reprogrid process" in capsys.readouterr().err
