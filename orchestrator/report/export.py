"""`reprogrid export`: a store's scores, and separately the literature table, written as files
in a shared format. Reads the store (and the literature CSV), hands rows to the pure mapping of
the format (orchestrator/report/eee.py, eee_literature.py), and writes one JSON file per record
under `<out>/scores/` and `<out>/literature/`, each a datastore tree (`data/<benchmark>/...`)
as the format's validator expects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from orchestrator.analysis.intervals import ProblemCounts, problem_counts
from orchestrator.report.eee import EeeOptions, EeeRecord, model_identity, score_logs, subset
from orchestrator.report.eee_literature import literature_logs
from orchestrator.report.grid import read_frame
from storage.literature import LiteratureMapping, LiteratureRow
from storage.store import Store

SCORES_DIR = "scores"
LITERATURE_DIR = "literature"


class ExportFormat(StrEnum):
    EEE = "eee"  # Every Eval Ever (EvalEval Coalition), schema 0.3.0
    MLFLOW = "mlflow"  # one MLflow run per setting, one experiment per store (mlflow_runs.py)


def parse_format(value: str) -> ExportFormat:
    try:
        return ExportFormat(value)
    except ValueError:
        choices = ", ".join(f.value for f in ExportFormat)
        raise ValueError(f"unknown export format {value!r}; formats: {choices}") from None


@dataclass(frozen=True)
class LiteratureSource:
    rows: Sequence[LiteratureRow]
    mapping: LiteratureMapping
    repo_id_of: Callable[[str], str | None]  # configured model name -> its Hugging Face id


@dataclass(frozen=True)
class ExportSummary:
    out: str
    scores: tuple[str, ...]  # files written, relative to `out`
    literature: tuple[str, ...]
    pilots_left_out: int = 0  # scored pilots not written (EeeOptions.pilots=False)


def problem_counts_of(store: Store, keys: Sequence[str]) -> dict[str, ProblemCounts]:
    """Samples and passes per problem of each pass@1 setting (its bootstrap interval)."""
    out = {}
    for key in keys:
        shard = store.read_shard("executions", key)
        if shard is not None and shard.num_rows:
            rows = shard.select(["task_id", "passed"]).to_pydict()
            out[key] = problem_counts(rows["task_id"], rows["passed"])
    return out


def _pilots(scores: Sequence[dict], settings: Sequence[dict]) -> int:
    """Scored settings over a subset of their benchmark's problems."""
    by_key = {s["setting_key"]: s for s in settings}
    return sum(
        subset(by_key[s["setting_key"]], s.get("n_problems")) is not None
        for s in scores
        if s["setting_key"] in by_key
    )


def _write(records: Sequence[EeeRecord], root: Path) -> tuple[str, ...]:
    written = []
    for record in records:
        path = root / record.path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Strict JSON (no NaN): the validator refuses anything else.
        path.write_text(
            json.dumps(record.log, indent=2, allow_nan=False, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        written.append(str(path.relative_to(root.parent)))
    return tuple(written)


def _repo_ids(settings: Sequence[dict], literature: LiteratureSource) -> dict[str, str]:
    """Configured model name -> Hugging Face id: the store's settings first, then config."""
    ids = {}
    for row in settings:
        model_id, developer = model_identity(row.get("model_repo_id"), str(row["model_name"]), "")
        if developer is None:
            ids[str(row["model_name"])] = model_id
    for name in set(literature.mapping.models.values()) - set(ids):
        repo = literature.repo_id_of(name)
        if repo is not None:
            ids[name] = repo
    return ids


def export_eee(
    store: Store,
    out: str | Path,
    options: EeeOptions,
    literature: LiteratureSource | None,
    retrieved_at: int,
) -> ExportSummary:
    """Write every scored setting of `store` (and, unless `literature` is None, every
    literature row) as Every Eval Ever records under `out`. `retrieved_at` (Unix seconds) stamps
    the literature records; a store record carries its setting's own time."""
    root = Path(out)
    scores = read_frame(store, "scores").to_dict("records")
    settings = read_frame(store, "settings").to_dict("records")
    runs = read_frame(store, "runs").to_dict("records")
    pass1 = [s["setting_key"] for s in scores if s.get("metric") == "pass@1"]
    records = score_logs(scores, settings, runs, problem_counts_of(store, pass1), options)
    written = _write(records, root / SCORES_DIR)
    cited: tuple[str, ...] = ()
    if literature is not None:
        repo_ids = _repo_ids(settings, literature)
        rows = literature_logs(literature.rows, literature.mapping, repo_ids, retrieved_at)
        cited = _write(rows, root / LITERATURE_DIR)
    return ExportSummary(
        str(root), written, cited, 0 if options.pilots else _pilots(scores, settings)
    )
