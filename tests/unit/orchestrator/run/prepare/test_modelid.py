"""A local model folder's identity: its content, not its path; hashed once, then cached by path,
size and mtime; weight files chosen as transformers chooses them."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

import orchestrator.run.prepare.modelid as modelid
from orchestrator.errors import ConfigError
from orchestrator.run.prepare.modelid import (
    CACHE_FOLDER,
    folder_identity,
    identity_files,
    model_identities,
    model_identity,
)
from workers.spec import BUILD_RECIPE_FILE, ModelSpec, Tuning


def safetensors(path: Path, payload: bytes) -> None:
    """A valid safetensors file: an 8-byte header length, the JSON header, the tensor bytes."""
    n = len(payload)
    raw = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + payload)


def make_folder(path: Path, payload: bytes = b"\x01\x02\x03\x04") -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "llama"}')
    (path / "tokenizer.json").write_text('{"model": {"type": "BPE"}}')
    (path / "README.md").write_text("a model card")
    safetensors(path / "model.safetensors", payload)
    return path


def model(repo_id: str, builder: str | None = None, revision: str = "r1") -> ModelSpec:
    return ModelSpec("m", repo_id, revision, "fam", 0.1, Tuning.BASE, "instruct", builder=builder)


def test_the_identity_is_the_content_wherever_the_folder_lies(tmp_path):
    a = make_folder(tmp_path / "mount-a" / "model")
    b = tmp_path / "mount-b" / "renamed"
    shutil.copytree(a, b)
    ident = folder_identity(a, str(tmp_path / "cache"))
    assert ident.startswith("sha256:") and len(ident) == len("sha256:") + 64
    assert folder_identity(b, str(tmp_path / "cache")) == ident
    (b / "README.md").write_text("another card")  # documentation cannot change an output
    (b / BUILD_RECIPE_FILE).write_text("{}")
    assert folder_identity(b, None) == ident
    safetensors(b / "model.safetensors", b"\x01\x02\x03\x05")  # one weight byte
    assert folder_identity(b, None) != ident
    shutil.copytree(a, tmp_path / "c")
    (tmp_path / "c" / "tokenizer.json").write_text('{"model": {"type": "Unigram"}}')
    assert folder_identity(tmp_path / "c", None) != ident


def test_weights_are_what_transformers_loads(tmp_path):
    folder = make_folder(tmp_path / "sharded")
    (folder / "model.safetensors").unlink()
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        safetensors(folder / name, name.encode())
    safetensors(folder / "consolidated.safetensors", b"not loaded")  # not in the index
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors"}}
    index["weight_map"]["b"] = "model-00002-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    (folder / "original").mkdir()  # subfolders are not loaded
    (folder / "original" / "params.json").write_text("{}")
    assert identity_files(folder) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
    ]
    before = folder_identity(folder, None)
    safetensors(folder / "consolidated.safetensors", b"changed, still not loaded")
    assert folder_identity(folder, None) == before
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ConfigError, match="names missing shard"):
        folder_identity(folder, None)


def test_bytes_are_hashed_once_then_only_stated(tmp_path, monkeypatch):
    folder = make_folder(tmp_path / "model")
    cache = str(tmp_path / "cache")
    first = folder_identity(folder, cache)
    assert len(list((tmp_path / "cache" / CACHE_FOLDER).glob("*.json"))) == 1

    def no_reading(path):
        raise AssertionError(f"{path} was read again")

    monkeypatch.setattr(modelid, "_file_sha256", no_reading)
    assert folder_identity(folder, cache) == first  # size and mtime unchanged: the cache
    weights = folder / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(AssertionError, match="read again"):
        folder_identity(folder, cache)  # a new mtime: the file is hashed again


def test_a_hub_cache_blob_is_named_by_its_sha256(tmp_path, monkeypatch):
    digest = "ab" * 32
    blob = tmp_path / "hub" / "blobs" / digest
    blob.parent.mkdir(parents=True)
    safetensors(blob, b"weights")
    folder = make_folder(tmp_path / "hub" / "snapshots" / "rev")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(blob)
    read = []
    original = modelid._file_sha256
    monkeypatch.setattr(modelid, "_file_sha256", lambda p: read.append(p.name) or original(p))
    folder_identity(folder, None)
    assert "model.safetensors" not in read and "config.json" in read


def test_builders_hub_ids_and_missing_folders(tmp_path):
    assert model_identity(model("org/name"), None) is None  # a Hub id: keyed as itself
    assert model_identity(model(str(tmp_path / "nowhere")), None) is None  # refused by preflight
    unbuilt = model(str(tmp_path / "tiny"), builder="tiny", revision="tiny-llama-v1")
    assert model_identity(unbuilt, None) == "builder:tiny"  # made by its recipe on any node
    built = make_folder(tmp_path / "tiny")
    (built / BUILD_RECIPE_FILE).write_text(json.dumps({"recipe": "tiny-llama-v1"}))
    assert model_identity(unbuilt, None) == "builder:tiny"
    (built / BUILD_RECIPE_FILE).write_text(json.dumps({"recipe": "tiny-llama-v0"}))
    assert model_identity(unbuilt, None) == folder_identity(built, None)  # not that recipe
    assert model_identities([unbuilt, model("org/name"), unbuilt], None) == {
        str(tmp_path / "tiny"): folder_identity(built, None)
    }
