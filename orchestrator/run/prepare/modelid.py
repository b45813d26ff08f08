"""A local model folder's identity: what it holds, not where it lies (docs/store.md, "Local
model folders").

The setting key names a Hub model by its id and revision. A local folder is named instead by
`ModelSpec.identity`, gathered here on the driver before the grid is expanded (as the replay
files' hashes are), so that moving or re-mounting a folder keeps every key:

- a folder that a builder makes (`model.builder`) is named by its recipe, `builder:<name>`
  (with the model's `revision`, the recipe, keyed beside it), while it is not built yet or its
  recipe marker names that revision: the builder makes the same folder on any node;
- any other folder with a `config.json` is named by its content, `sha256:<hex>`: the SHA-256 of
  the canonical JSON of {file name: SHA-256 of its bytes} over the files that make a model's
  outputs (`identity_files`): the config and generation config, the tokenizer and chat template
  files, remote code, and the weights transformers loads (the shards a safetensors or bin index
  names, else the single weight file; subfolders are not loaded and not hashed). Safetensors
  headers and indexes carry no hash of the weights (only names, shapes and offsets), so the
  bytes are hashed, once: each file's digest is cached in `<cache_dir>/model-identity/`, keyed
  by the folder's path and the file's size and mtime, so a later plan only stats the files.
  Weights in a Hugging Face cache snapshot (symlinks to `blobs/<sha256>`) are not read at all:
  the blob's name is the SHA-256 of its content;
- anything else (a Hub id, a `fake://` test model, a folder that is not there) has no identity:
  its `repo_id` is keyed, as before (a missing folder is refused by the preflight anyway).

The folder's path stays in the provenance (`model_repo_id` of the settings rows).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError
from workers.keys import canonical_json, sha256_hex
from workers.spec import BUILD_RECIPE_FILE, ModelSpec

logger = logging.getLogger(__name__)

IDENTITY_VERSION = 1  # bump when the files or the digest below change (every local key moves)
CACHE_FOLDER = "model-identity"
# Weight files as transformers looks for them, in its order of preference: an index and the
# shards it names, else one file.
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
WEIGHT_SINGLES = ("model.safetensors", "pytorch_model.bin")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack")
# Config, tokenizer, chat template and remote-code files.
TEXT_SUFFIXES = (".json", ".txt", ".model", ".tiktoken", ".jinja", ".py", ".vocab")
# Files that cannot change an output: documentation, and reprogrid's own build marker.
IGNORED_PREFIXES = ("readme", "license", "notice", "use_policy", ".")
IGNORED_NAMES = frozenset({BUILD_RECIPE_FILE})
_BLOB = re.compile(r"[0-9a-f]{64}")


def weight_files(names: set[str], index_shards: Mapping[str, Sequence[str]]) -> list[str]:
    """The weight files transformers would load from a folder holding `names`: the first index
    present with the shards it names (`index_shards[index]`), else the first single file, else
    every file with a weight suffix (an unknown layout: nothing is left out)."""
    for index in WEIGHT_INDEXES:
        if index in names:
            return [index, *sorted(set(index_shards[index]))]
    for single in WEIGHT_SINGLES:
        if single in names:
            return [single]
    return sorted(n for n in names if n.endswith(WEIGHT_SUFFIXES))


def text_files(names: set[str]) -> list[str]:
    """Config, tokenizer, chat-template and remote-code files among `names`."""
    return sorted(
        n
        for n in names
        if n.endswith(TEXT_SUFFIXES)
        and n not in IGNORED_NAMES
        and not n.lower().startswith(IGNORED_PREFIXES)
        and n not in WEIGHT_INDEXES
    )


def identity_of(digests: Mapping[str, str]) -> str:
    """The folder's identity from {file name: SHA-256 of its bytes}. Pure."""
    return "sha256:" + sha256_hex(canonical_json({"v": IDENTITY_VERSION, "files": dict(digests)}))


def _index_shards(folder: Path, index: str) -> list[str]:
    try:
        data = json.loads((folder / index).read_text(encoding="utf-8"))
        shards = [str(s) for s in data["weight_map"].values()]
    except (OSError, ValueError, KeyError, AttributeError) as e:
        raise ConfigError(f"model folder {folder}: {index} is not a weight index ({e})") from e
    missing = sorted({s for s in shards if not (folder / s).is_file()})
    if missing:
        raise ConfigError(f"model folder {folder}: {index} names missing shard(s) {missing[:3]}")
    return shards


def identity_files(folder: Path) -> list[str]:
    """The files of `folder` (top level only) that make its identity, sorted."""
    names = {p.name for p in folder.iterdir() if p.is_file()}
    shards = {i: _index_shards(folder, i) for i in WEIGHT_INDEXES if i in names}
    return sorted(set(text_files(names)) | set(weight_files(names, shards)))


def _blob_sha256(path: Path) -> str | None:
    """The SHA-256 a Hugging Face cache already knows: a snapshot file is a symlink to
    `blobs/<sha256 of the content>` for every file stored with Git LFS (the weights)."""
    if not path.is_symlink():
        return None
    target = Path(os.path.realpath(path))
    return target.name if target.parent.name == "blobs" and _BLOB.fullmatch(target.name) else None


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _cache_path(cache_dir: str, folder: Path) -> Path:
    return Path(cache_dir) / CACHE_FOLDER / f"{sha256_hex(str(folder))[:32]}.json"


def _read_cache(path: Path, folder: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    ok = isinstance(data, dict) and data.get("v") == IDENTITY_VERSION
    if not ok or data.get("folder") != str(folder) or not isinstance(data.get("files"), dict):
        return {}
    return data["files"]


def _write_cache(path: Path, folder: Path, files: Mapping[str, Any]) -> None:
    """Write-to-temp then rename: two plans at once never leave a torn file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"v": IDENTITY_VERSION, "folder": str(folder), "files": files}, fh)
        os.replace(tmp, path)
    except OSError as e:
        # The identity is right either way; only the next plan hashes again.
        logger.warning("model identity cache %s not written (%s): hashed again next time", path, e)


def folder_identity(folder: str | os.PathLike, cache_dir: str | None) -> str:
    """`sha256:<hex>` of what the folder holds (see the module docstring). A file's digest is
    reused from the cache while its size and mtime are unchanged."""
    root = Path(os.path.abspath(folder))
    cache = _cache_path(cache_dir, root) if cache_dir else None
    cached = _read_cache(cache, root) if cache is not None else {}
    files: dict[str, Any] = {}
    hashed = 0
    try:
        for name in identity_files(root):
            path = root / name
            stat = path.stat()
            entry = cached.get(name)
            if (
                entry
                and entry.get("size") == stat.st_size
                and entry.get("mtime_ns") == (stat.st_mtime_ns)
            ):
                files[name] = entry
                continue
            digest = _blob_sha256(path)
            if digest is None:
                digest = _file_sha256(path)
                hashed += stat.st_size
            files[name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
    except OSError as e:
        raise ConfigError(f"model folder {root}: cannot read {e.filename or ''} ({e})") from e
    if hashed:
        logger.info("model folder %s: hashed %.1f MB once (its identity)", root, hashed / 1e6)
    if cache is not None and files != cached:
        _write_cache(cache, root, files)
    return identity_of({name: entry["sha256"] for name, entry in files.items()})


def built_by_recipe(folder: Path, revision: str) -> bool:
    """The folder's builder marker names `revision` (the recipe the model config asks for)."""
    try:
        marker = json.loads((folder / BUILD_RECIPE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("recipe") == revision


def model_identity(model: ModelSpec, cache_dir: str | None) -> str | None:
    """What the key names `model` by (see the module docstring); None: its `repo_id`."""
    folder = Path(model.repo_id)
    built = (folder / "config.json").is_file()
    if model.builder is not None and (not built or built_by_recipe(folder, model.revision)):
        return f"builder:{model.builder}"
    if built:
        return folder_identity(folder, cache_dir)
    return None


def model_identities(models: Sequence[ModelSpec], cache_dir: str | None) -> dict[str, str]:
    """{repo_id: identity} of the models that have one (the grid's Environment)."""
    out: dict[str, str] = {}
    for model in models:
        if model.repo_id not in out:
            identity = model_identity(model, cache_dir)
            if identity is not None:
                out[model.repo_id] = identity
    return out
