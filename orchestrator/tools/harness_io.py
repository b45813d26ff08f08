"""BigCode evaluation harness `generations.json`: export a stored setting, import and score one.

The harness's file (`--save_generations`, read back by `--load_generations_path`) is a JSON list
with one entry per problem in dataset order, each a list of the n_samples post-processed
candidates (declaration + fixed body, without the import header), written with plain
`json.dump`. Export writes the `program` column of the generations table in that shape.

One exception to "n_samples per entry": with `--batch_size` B > 1 (`samples_per_call`), a
prompt at or over the length limit is not generated from; the harness's catch returns the
1-row input for each of the problem's ceil(n / B) generate calls and zips it with the B copies
of the task id, so the problem keeps ceil(n / B) identical candidates. The store keeps n
copies (flagged `prompt_truncated`, one per sample index, as for any setting); export writes
the harness's ceil(n / B), and import accepts them (and stores n copies again). pass@1 is the
same either way: the copies are identical.

Import scores such a file like any setting: the candidates are executed as they are through the
benchmark adapter (no post-processing is re-applied, as in the harness) and stored with backend
`replay` (generations with `program` = the entry and `continuation` = "", executions, scores)
through the StoreWriter, under the store's writer lock. The setting key is built from the run config
of the given overrides, with `replay_sha256` = the sha256 of the file, so an imported setting never
collides with a generated one. The backend the overrides name (default: the config's, `hf`, the
harness's transformers) is recorded as the setting's `claimed_backend`, which lines the import up
with the runs it reproduces (report columns, `compare-backends`); the file's name and path are in
the settings row's engine options and the runs row's data sources.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.run.config.load import CellDefaults, RunConfig, available, load_run_config
from orchestrator.run.config.options import choice_error
from storage.index import SettingState, build_index
from storage.integrity import setting_key_of
from storage.schema import RunStatus
from storage.store import Store
from workers.benchmarks.base import Benchmark
from workers.spec import BackendName, ExecutionBatch, LengthSemantics

logger = logging.getLogger(__name__)

IMPORT_BACKEND_VERSION = "bigcode-harness generations.json"


class HarnessFileError(ValueError):
    """A generations.json that is not a list of lists of strings (names the bad entry)."""


@dataclass(frozen=True)
class ImportOutcome:
    setting_key: str
    store: str
    n_problems: int
    n_samples: int
    n_passed: int
    pass_at_1: float | None
    replay_sha256: str
    claimed_backend: str | None  # the backend the file's generations come from (its claim)
    file: str  # the imported file, as given


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


def _run_config(
    overrides: Sequence[str], model: str, n_samples: int, path: Path
) -> tuple[RunConfig, BackendName | None]:
    """The run config of the import (backend replay) and the backend the file claims: the one
    the overrides name, else the config's default (hf, as the harness generates)."""
    known = available("model")
    if model not in known:
        raise choice_error("model", model, known)
    config = load_run_config([*overrides, f"model={model}", f"n_samples={n_samples}"])
    if "backend" in dict(config.axes):
        raise ConfigError("import-generations scores one setting: name one backend, not a sweep")
    values = config.defaults.as_dict()
    claimed = _claimed(str(values["backend"]))
    values["backend"] = BackendName.REPLAY.value
    # replay_path is not keyed (replay_sha256 is); it only marks the cell as runnable. It is a
    # pattern (`{variant}`...): braces of the file's name are escaped.
    pattern = path.name.replace("{", "{{").replace("}", "}}")
    defaults = CellDefaults(tuple(sorted(values.items())))
    return dataclasses.replace(config, replay_path=pattern, defaults=defaults), claimed


def _claimed(backend: str) -> BackendName | None:
    """The backend a file claims; `replay` claims none, `auto` names no one backend."""
    if backend == "auto":
        raise ConfigError(
            "backend=auto is not a backend a file was generated with: name it "
            "(backend=hf for the harness's transformers, or backend=vllm)"
        )
    return None if backend == BackendName.REPLAY.value else BackendName(backend)


def _cell(config, file_sha: str, n_entries: int, claimed: BackendName | None):
    """The one grid cell of the import; a file with fewer problems than the benchmark selects
    the first ones (the harness's --limit), unless benchmark.limit or benchmark.problems says
    otherwise (its entries are then the selected problems, in benchmark order)."""
    from orchestrator.run.prepare.grid import Environment, expand_grid, replay_files
    from orchestrator.run.prepare.modelid import model_identities
    from orchestrator.run.execute.runner import load_benchmark, with_selection

    loaded = load_benchmark(config.benchmark, cache_dir=config.cache_dir)
    config = with_selection(config, loaded.problem_ids())
    n_problems = len(config.benchmark.select(loaded.problem_ids()))
    selected = config.benchmark.limit is not None or config.benchmark.problems is not None
    if not selected and n_entries < n_problems:
        benchmark = dataclasses.replace(config.benchmark, limit=n_entries)
        config = dataclasses.replace(config, benchmark=benchmark)
        n_problems = n_entries
    if n_problems != n_entries:
        raise ConfigError(
            f"the file has {n_entries} problems but the setting selects {n_problems} "
            f"(benchmark.limit={config.benchmark.limit}, benchmark.problems="
            f"{','.join(config.benchmark.problems or ()) or 'null'}); they must agree"
        )
    env = Environment(
        replay_files={f: file_sha for f in replay_files(config)},
        model_identities=model_identities(config.models, config.cache_dir),
    )
    cells = expand_grid(config, loaded.data_sha256, env)
    if len(cells) != 1:
        raise ConfigError(f"import-generations scores one setting; the overrides give {len(cells)}")
    if cells[0].skipped:
        raise ConfigError(f"the setting cannot be imported: {cells[0].skip_reason}")
    cell = cells[0]  # the claim is a label: the key stays the replay setting's
    engine = dataclasses.replace(cell.setting.engine, claimed_backend=claimed)
    setting = dataclasses.replace(cell.setting, engine=engine)
    return config, loaded, dataclasses.replace(cell, setting=setting)


def _samples(benchmark: Benchmark, setting, entries: Sequence[Sequence[str]], at_limit: set[int]):
    """One record per sample; an entry of a prompt at the length limit (`at_limit`) becomes
    n_samples copies flagged `prompt_truncated`, as a generated setting stores it."""
    from workers.spec import SampleRecord

    task_ids = setting.benchmark.select(benchmark.problem_ids())
    return [
        SampleRecord(
            task_id=task_id,
            sample_index=j,
            prompt="",
            continuation="",
            program=program,
            n_prompt_tokens=None,  # the harness file holds programs only: not known
            n_output_tokens=None,
            prompt_truncated=i in at_limit,  # what the harness's shorter entry says
            hit_length_limit=False,
        )
        for i, (task_id, entry) in enumerate(zip(task_ids, entries, strict=True))
        for j, program in enumerate([entry[0]] * setting.n_samples if i in at_limit else entry)
    ]


def _generations(key: str, setting, samples, elapsed_s: float, file_sha: str, path: Path):
    from workers.spec import EngineInfo, SettingGenerations, WorkerInfo

    engine = setting.engine
    info = EngineInfo(
        backend=engine.backend,
        backend_version=IMPORT_BACKEND_VERSION,
        device=None,
        effective_dtype=engine.dtype.value,
        model_revision=engine.model.revision,
        tokenizer_sha256=None,
        chat_template_sha256=None,
        eos_token=None,
        options={"replay_sha256": file_sha, "file": str(path)},
    )
    now = time.time()
    # The generations were made elsewhere: no process, load or generation time is known here.
    return SettingGenerations(
        setting_key=key,
        samples=tuple(samples),
        engine_info=info,
        worker=WorkerInfo(hostname=socket.gethostname(), node_id="", pid=None),
        generation_s=None,
        engine_load_s=None,
        started_at=now - elapsed_s,
        finished_at=now,
    )


def import_generations(
    path: str | Path, model: str, overrides: Sequence[str] = (), wait_lock_s: float = 0.0
) -> ImportOutcome:
    """Execute the candidates of a harness file and store them as one `replay` setting."""
    from orchestrator.run.prepare.provenance import library_versions_json
    from orchestrator.run.execute.runner import file_sha256
    from orchestrator.run.execute.writer import StoreWriter, utc_now

    path = Path(path)
    entries = read_generations_json(path)
    file_sha = file_sha256(str(path))
    config, claimed = _run_config(overrides, model, max(len(e) for e in entries), path)
    config, loaded, cell = _cell(config, file_sha, len(entries), claimed)
    at_limit = at_limit_entries(entries, cell.setting.samples_per_call, path)
    samples = _samples(loaded, cell.setting, entries, at_limit)
    started = time.monotonic()
    records = loaded.execute(samples, config.limits, workers=config.exec_workers)
    store = Store(config.store)
    run_id = f"{utc_now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    versions = library_versions_json()
    with store.writer_lock(wait_s=wait_lock_s):
        writer = StoreWriter(
            store, run_id, versions, benchmarks={loaded.name: loaded}, limits=config.limits
        )
        writer.started(cell.key, cell.setting)
        elapsed = time.monotonic() - started
        gens = _generations(cell.key, cell.setting, samples, elapsed, file_sha, path)
        writer.generated(cell.key, cell.setting, gens)
        batch = ExecutionBatch(tuple(records), loaded.execution_environment(config.limits))
        score = writer.executed(cell.key, cell.setting, batch)
        row = _run_row(run_id, config, cell.key, versions, {path: file_sha}, loaded)
        store.write_rows("runs", run_id, [row])
    shown = "-" if score["pass_at_1"] is None else f"{100 * score['pass_at_1']:.2f}%"
    logger.info("imported %s as setting %s: pass@1 %s", path.name, cell.key[:12], shown)
    return ImportOutcome(
        setting_key=cell.key,
        store=config.store,
        n_problems=len(entries),
        n_samples=cell.setting.n_samples,
        n_passed=score["n_passed"],
        pass_at_1=score["pass_at_1"],
        replay_sha256=file_sha,
        claimed_backend=claimed.value if claimed else None,
        file=str(path),
    )


def _run_row(
    run_id: str, config, key: str, versions: str, files: dict[Path, str], loaded: Benchmark
) -> dict:
    """The runs row: the imported file by its name (with its path and hash) beside the
    benchmark data it was scored against."""
    from orchestrator.run.prepare.provenance import git_revision
    from orchestrator.run.execute.writer import utc_now

    now = utc_now()
    return {
        "run_id": run_id,
        "started_at": now,
        "finished_at": now,
        "command": "import-generations",
        "overrides_json": json.dumps(list(config.overrides)),
        "setting_keys": [key],
        "n_generated": 0,
        "n_executed": 1,
        "git_revision": git_revision(),
        "hostname": socket.gethostname(),
        "library_versions_json": versions,
        "data_sources_json": json.dumps(
            {
                **{p.name: {"source": str(p), "sha256": sha} for p, sha in files.items()},
                loaded.name: {"source": loaded.source, "sha256": loaded.data_sha256},
            }
        ),
        "cluster_address": "local",
        "status": RunStatus.FINISHED.value,
    }
