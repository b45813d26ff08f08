"""Import a BigCode harness `generations.json` (tools/harness_io.py reads it) and score it as
one setting.

One exception to "n_samples per entry": with `--batch_size` B > 1 (`samples_per_call`), a
prompt at or over the length limit is not generated from; the harness's catch returns the
1-row input for each of the problem's ceil(n / B) generate calls and zips it with the B copies
of the task id, so the problem keeps ceil(n / B) identical candidates. The store keeps n
copies (flagged `prompt_truncated`, one per sample index, as for any setting); export writes
the harness's ceil(n / B), and import accepts them (and stores n copies again). pass@1 is the
same either way: the copies are identical.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.run.api import (
    CellDefaults,
    RunConfig,
    RunFacts,
    RunRecord,
    available,
    choice_error,
    file_sha256,
    load_benchmark,
    load_run_config,
    prepare,
    with_selection,
)
from orchestrator.tools.harness_io import at_limit_entries, read_generations_json
from storage.presence import require_creatable
from storage.store import Store
from workers.benchmarks.base import Benchmark
from workers.execspec import ExecutionBatch

logger = logging.getLogger(__name__)


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


def _run_config(
    overrides: Sequence[str], model: str, n_samples: int, path: Path
) -> tuple[RunConfig, str | None]:
    """The run config of the import (backend replay) and the backend the file claims: the one
    the overrides name, else the config's default (hf, as the harness generates)."""
    known = available("model")
    if model not in known:
        raise choice_error("model", model, known)
    config = load_run_config([*overrides, f"model={model}", f"n_samples={n_samples}"])
    if "backend" in dict(config.axes):
        raise ConfigError("import-generations scores one setting: name one backend, not a sweep")
    from workers.backends.replay import REPLAY, ReplayOptions  # an import is a replay

    values = config.defaults.as_dict()
    claimed = _claimed(str(values["backend"]), REPLAY.name)
    values["backend"] = REPLAY.name
    # The file's path is not keyed (its hash is). It is a pattern (`{variant}`...): braces of
    # the path are escaped.
    pattern = str(path).replace("{", "{{").replace("}", "}}")
    defaults = CellDefaults(tuple(sorted(values.items())))
    config = config.with_backend_options(REPLAY.name, ReplayOptions(pattern=pattern))
    return dataclasses.replace(config, defaults=defaults), claimed


def _claimed(backend: str, replay: str) -> str | None:
    """The backend a file claims: the one the overrides name (a replay claims none); `auto`
    names no one backend."""
    if backend == "auto":
        raise ConfigError(
            "backend=auto is not a backend a file was generated with: name it "
            "(backend=hf for the harness's transformers, or backend=vllm)"
        )
    return None if backend == replay else backend


def _cell(config, n_entries: int, claimed: str | None):
    """The one grid cell of the import; a file with fewer problems than the benchmark selects
    the first ones (the harness's --limit), unless benchmark.limit or benchmark.problems says
    otherwise (its entries are then the selected problems, in benchmark order)."""
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
    cells = prepare(config, loaded).cells
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
        backend_versions={},  # made elsewhere, by libraries the harness's file does not name
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
    path = Path(path)
    entries = read_generations_json(path)
    file_sha = file_sha256(str(path))
    config, claimed = _run_config(overrides, model, max(len(e) for e in entries), path)
    require_creatable(config.store)  # before executing: not a file, nor a folder of stores
    config, loaded, cell = _cell(config, len(entries), claimed)
    at_limit = at_limit_entries(entries, cell.setting.samples_per_call, path)
    samples = _samples(loaded, cell.setting, entries, at_limit)
    started = time.monotonic()
    records = loaded.execute(samples, config.limits, workers=config.exec_workers)
    store = Store(config.store, lease_s=config.store_lock_lease_s)
    facts = RunFacts(
        command="import-generations",
        overrides=config.overrides,
        # the imported file by its name (with its path and hash) beside the benchmark data it
        # was scored against
        data_sources={
            path.name: {"source": str(path), "sha256": file_sha},
            loaded.name: {"source": loaded.source, "sha256": loaded.data_sha256},
        },
    )
    with (
        store.writer_lock(wait_s=wait_lock_s),
        RunRecord(store, facts, [cell.key], {loaded.name: loaded}, config.limits) as run,
    ):
        run.writer.started(cell.key, cell.setting)
        elapsed = time.monotonic() - started
        gens = _generations(cell.key, cell.setting, samples, elapsed, file_sha, path)
        run.writer.generated(cell.key, cell.setting, gens, counted=False)
        batch = ExecutionBatch(tuple(records), loaded.execution_environment(config.limits))
        score = run.writer.executed(cell.key, cell.setting, batch)
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
        claimed_backend=claimed,
        file=str(path),
    )
