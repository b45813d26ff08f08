"""BigCode evaluation harness `generations.json`: the file format, and a stored setting exported
in it.

The harness's file (`--save_generations`, read back by `--load_generations_path`) is a JSON list
with one entry per problem in dataset order, each a list of the n_samples post-processed
candidates (declaration + fixed body, without the import header), written with plain
`json.dump`. Export writes the `program` column of the generations table in that shape.

Importing such a file is tools/harness_import.py.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

from storage.index import SettingState, build_index
from storage.integrity import setting_key_of
from storage.store import Store
from workers.spec import LengthSemantics

logger = logging.getLogger(__name__)


class HarnessFileError(ValueError):
    """A generations.json that is not a list of lists of strings (names the bad entry)."""


def _task_order(task_id: str) -> tuple:
    """Dataset order of task ids like "Python/12" (numeric suffix), else by text."""
    match = re.search(r"(\d+)$", task_id)
    return (task_id[: match.start()], int(match.group(1))) if match else (task_id, -1)


def export_entries(
    store: Store, setting_key: str, index: dict[str, SettingState] | None = None
) -> list[list[str]]:
    """The setting's programs as the harness writes them: [[sample 0, sample 1, ...], ...] per
    problem, problems in dataset order (task ids sorted by their numeric suffix). Its
    generations may be one shard or chunks; a setting whose generations are not all stored
    is an error (a harness file of part of a setting would score as the whole)."""
    index = build_index(store) if index is None else index
    state = index.get(setting_key)
    if state is None or not state.has_generations:
        known = sorted(k for k, st in index.items() if st.has_generations)
        hint = f" Stored settings: {', '.join(k[:12] for k in known[:10])}" if known else ""
        partial = state is not None and state.partially_generated
        what = (
            f"only {state.generated_samples} of {state.total_samples} generations"
            if partial and state is not None
            else "no generations"
        )
        raise FileNotFoundError(f"store {store.uri} has {what} for setting {setting_key}.{hint}")
    rows = store.read_table("generations", [setting_key])
    by_task: dict[str, list[tuple[int, str, bool]]] = {}
    for r in rows.select(["task_id", "sample_index", "program", "prompt_truncated"]).to_pylist():
        sample = (r["sample_index"], r["program"], bool(r["prompt_truncated"]))
        by_task.setdefault(r["task_id"], []).append(sample)
    per_call = _samples_per_call(store, setting_key)
    return [harness_entry(sorted(by_task[t]), per_call) for t in sorted(by_task, key=_task_order)]


def _samples_per_call(store: Store, setting_key: str) -> int:
    """The setting's samples per generate call where prompts at the limit are not generated
    from (total-length semantics, as in the harness), else 1 (nothing to collapse)."""
    shard = store.read_shard("settings", setting_key)
    row = shard.to_pylist()[0] if shard is not None and shard.num_rows else {}
    if row.get("length_semantics") != LengthSemantics.TOTAL.value:
        return 1
    return max(1, int(row.get("samples_per_call") or 1))


def harness_entry(samples: Sequence[tuple[int, str, bool]], samples_per_call: int) -> list[str]:
    """One problem's entry as the harness writes it, from its (sample_index, program,
    prompt_truncated) in order: every program, or for a prompt at the length limit (every
    sample flagged) with several samples per call, the first ceil(n / samples_per_call)
    (identical) copies: one per generate call (see the module docstring)."""
    programs = [program for _, program, _ in samples]
    if samples_per_call > 1 and samples and all(truncated for _, _, truncated in samples):
        return programs[: math.ceil(len(programs) / samples_per_call)]
    return programs


def resolve_setting_key(store: Store, prefix: str) -> str:
    """A full setting key from a unique prefix (as reports show 12 characters)."""
    stored = {setting_key_of(k) for k in store.shards("generations")}
    keys = sorted(k for k in stored if k.startswith(prefix))
    if len(keys) == 1:
        return keys[0]
    if not keys:
        raise FileNotFoundError(
            f"no setting with generations matches key {prefix!r} in {store.uri}"
        )
    raise ValueError(
        f"setting key prefix {prefix!r} is ambiguous: {', '.join(k[:16] for k in keys)}"
    )


def export_all(store: Store, folder: str | Path) -> list[tuple[str, Path, int, int]]:
    """One harness file per setting whose generations are all stored:
    `<folder>/<setting key>.json`. Returns (key, path, problems, samples) per file."""
    index = build_index(store)
    keys = sorted(k for k, state in index.items() if state.has_generations)
    if not keys:
        raise FileNotFoundError(f"store {store.uri} holds no setting with all its generations")
    written = []
    for key in keys:
        entries = export_entries(store, key, index)
        path = write_generations_json(entries, Path(folder) / f"{key}.json")
        written.append((key, path, len(entries), max(len(e) for e in entries)))
    write_export_index(store, Path(folder), written)
    return written


INDEX_FILE = "index.json"
INDEX_FIELDS = (
    "model_name",
    "model_repo_id",
    "benchmark",
    "variant",
    "template",
    "decoding",
    "max_length",
    "precision",
    "backend",
    "claimed_backend",
    "n_samples",
    "n_problems",
)


def write_export_index(
    store: Store, folder: Path, written: Sequence[tuple[str, Path, int, int]]
) -> Path:
    """`<folder>/index.json`: which setting each file holds (its key, file name and the fields
    of its settings row), so the files are usable without the store."""
    keys = [key for key, *_ in written]
    rows = {r["setting_key"]: r for r in store.read_table("settings", keys).to_pylist()}
    index = [
        {
            "setting_key": key,
            "file": path.name,
            "problems": n_problems,
            "samples_per_problem": n_samples,
            **{f: rows.get(key, {}).get(f) for f in INDEX_FIELDS},
        }
        for key, path, n_problems, n_samples in written
    ]
    target = folder / INDEX_FILE
    target.write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return target


def write_generations_json(entries: Sequence[Sequence[str]], path: str | Path) -> Path:
    """Plain json.dump, as the harness writes it (ASCII-escaped, no indent)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        json.dump([list(e) for e in entries], fh)
    return path


def read_generations_json(path: str | Path) -> list[list[str]]:
    """Parse and check a harness file: a non-empty list of non-empty lists of strings (their
    lengths are checked against the setting by `at_limit_entries`)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessFileError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise HarnessFileError(f"{path}: not JSON ({e})") from e
    if not isinstance(data, list) or not data:
        raise HarnessFileError(f"{path}: expected a non-empty JSON list (one entry per problem)")
    for i, entry in enumerate(data):
        if not isinstance(entry, list) or not entry:
            raise HarnessFileError(f"{path}: entry {i} is not a non-empty list of candidates")
        bad = [j for j, c in enumerate(entry) if not isinstance(c, str)]
        if bad:
            raise HarnessFileError(f"{path}: entry {i}, candidate {bad[0]} is not a string")
    return data


def at_limit_entries(
    entries: Sequence[Sequence[str]], samples_per_call: int, path: str | Path
) -> set[int]:
    """The entries (indices) of prompts at the length limit: ceil(n / samples_per_call)
    identical candidates where the others hold n, the longest. Any other size is an error."""
    n = max(len(e) for e in entries)
    short = math.ceil(n / max(1, samples_per_call))
    out = set()
    for i, entry in enumerate(entries):
        if len(entry) == n:
            continue
        if len(entry) != short or len(set(entry)) != 1:
            sizes = sorted({len(e) for e in entries})
            raise HarnessFileError(
                f"{path}: entry {i} holds {len(entry)} samples, others {n} ({sizes}); the "
                f"harness writes ceil(n_samples / batch_size) identical copies only for a "
                f"prompt at the length limit ({short} with samples_per_call="
                f"{samples_per_call}: pass --setting samples_per_call=B with its --batch_size); "
                "otherwise trim the file to one size"
            )
        out.add(i)
    return out
