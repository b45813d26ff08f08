"""A moved model folder keeps its results: a local folder is keyed by what it holds, so a grid run
from one folder plans as done from a copy elsewhere (the real transformers path, tiny model)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from orchestrator.cli import main
from orchestrator.run.prepare.modelid import CACHE_FOLDER

GRID = [
    "model=tiny",
    "benchmark.limit=2",
    "template=instruct,own",
    "decoding=greedy",
    "max_length=512",
    "dtype=fp32",
    "backend=hf",
]


def plan(capsys, *overrides) -> dict[str, str]:
    """{setting key: action} of `plan --json`."""
    assert main(["plan", "--json", *overrides]) == 0
    data = json.loads(capsys.readouterr().out)
    return {s["setting_key"]: s["action"] for e in data["engines"] for s in e["settings"]}


def flip_last_weight_byte(folder: Path) -> None:
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    (header,) = struct.unpack("<Q", data[:8])
    assert len(data) > 8 + header  # the last byte is tensor data, not the header
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))


def test_a_copied_model_folder_plans_its_grid_as_done(env, cache_dir, capsys, tmp_path):
    built = cache_dir / "models" / "tiny-llama"
    first = tmp_path / "mount-a" / "tiny"
    shutil.copytree(built, first)
    store = tmp_path / "store"
    # Without the builder: the folder is keyed by its content.
    local = [*GRID, "model.builder=null", f"store={store}"]
    assert main(["run", "--json", *local, f"model.repo_id={first}"]) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["generated"] == 2 and outcome["grid_complete"]
    ran = {s["setting_key"] for s in outcome["settings"]}
    identities = {json.loads(r["setting_json"])["engine"]["model"] for r in _settings_rows(store)}
    assert len(identities) == 1 and identities.pop().startswith("sha256:")
    assert {r["model_repo_id"] for r in _settings_rows(store)} == {str(first)}  # provenance

    moved = tmp_path / "mount-b" / "renamed"
    shutil.move(first, moved)  # another mount point, another name; the old path is gone
    after_move = plan(capsys, *local, f"model.repo_id={moved}")
    assert after_move == dict.fromkeys(ran, "done")
    assert list((cache_dir / CACHE_FOLDER).glob("*.json"))  # digests cached for the next plan

    changed = tmp_path / "changed"
    shutil.copytree(moved, changed)
    flip_last_weight_byte(changed)
    other = plan(capsys, *local, f"model.repo_id={changed}")
    assert set(other.values()) == {"generate"} and not set(other) & ran  # other weights

    # With the builder: a folder made by its recipe is keyed by the recipe, wherever it lies.
    copy = tmp_path / "elsewhere" / "tiny"
    shutil.copytree(built, copy)
    here = [*GRID, f"store={tmp_path / 'built-store'}"]
    assert plan(capsys, *here) == plan(capsys, *here, f"model.repo_id={copy}")


def _settings_rows(store: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(store / "settings").to_pylist()
