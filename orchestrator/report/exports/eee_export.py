"""`reprogrid export`: a store's scores, and separately the literature table, written as files
in a shared format. Reads the store (and the literature CSV), hands rows to the pure mapping of
the format (report/exports/eee.py, eee_literature.py), and writes one JSON file per record
under `<out>/scores/` and `<out>/literature/`, each a datastore tree (`data/<benchmark>/...`)
as the format's validator expects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.report.choices import ExportFormat
from orchestrator.report.exports.eee import EeeOptions, EeeRecord, score_logs
from orchestrator.report.exports.eee_literature import literature_logs
from orchestrator.report.exports.eeefields import model_identity, subset
from orchestrator.report.tables import damaged
from orchestrator.report.tables.data import ReportOptions
from orchestrator.report.tables.grid import read_frame
from orchestrator.report.tables.published import Published, literature_of, store_cards
from orchestrator.report.tables.records import records
from orchestrator.report.tables.scored import Scored, scored
from storage.damage import StoreDamage
from storage.store import Store
from workers.scoring import ProblemCounts

SCORES_DIR = "scores"
LITERATURE_DIR = "literature"


def parse_format(value: str) -> ExportFormat:
    try:
        return ExportFormat(value)
    except ValueError:
        choices = ", ".join(f.value for f in ExportFormat)
        raise ValueError(f"unknown export format {value!r}; formats: {choices}") from None


@dataclass(frozen=True)
class LiteratureSource:
    """Where each benchmark's published values come from: its card's, or the user's
    (`options.literature_path` / `mapping_path`, as the report reads them)."""

    options: ReportOptions
    repo_id_of: Callable[[str], str | None]  # configured model name -> its Hugging Face id


@dataclass(frozen=True)
class ExportSummary:
    out: str
    scores: tuple[str, ...]  # files written, relative to `out`
    literature: tuple[str, ...]
    pilots_left_out: int = 0  # scored pilots not written (EeeOptions.pilots=False)
    notes: tuple[str, ...] = ()  # benchmarks whose published values could not be read, ...


def problem_counts_of(store: Store, keys: Sequence[str]) -> dict[str, ProblemCounts]:
    """Samples and passes per problem of each of the settings `keys` that has them (their
    stored counts, or derived once from the executions: report/scored.py)."""
    scores = store.read_table("scores", keys).to_pylist()
    out = {}
    for row in scores:
        counts = scored(store, row).counts
        if counts is not None and counts.n:
            out[str(row["setting_key"])] = counts
    return out


def _measured(store: Store, scores: Sequence[dict]) -> dict[str, Scored]:
    """The counts behind each score (the headline's interval, a pilot's problems)."""
    return {s["setting_key"]: scored(store, s) for s in scores}


def _pilots(scores: Sequence[dict], settings: Sequence[dict]) -> int:
    """Scored settings over a subset of their benchmark's problems."""
    by_key = {s["setting_key"]: s for s in settings}
    return sum(
        subset(by_key[s["setting_key"]], s.get("n_problems")) is not None
        for s in scores
        if s["setting_key"] in by_key
    )


def _write(logs: Sequence[EeeRecord], root: Path) -> tuple[str, ...]:
    written = []
    for record in logs:
        path = root / record.path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Strict JSON (no NaN): the validator refuses anything else.
        path.write_text(
            json.dumps(record.log, indent=2, allow_nan=False, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        written.append(str(path.relative_to(root.parent)))
    return tuple(written)


def _repo_ids(
    settings: Sequence[dict], parts: Sequence[Published], literature: LiteratureSource
) -> dict[str, str]:
    """Configured model name -> Hugging Face id: the store's settings first, then config."""
    ids = {}
    for row in settings:
        model_id, developer = model_identity(row.get("model_repo_id"), str(row["model_name"]), "")
        if developer is None:
            ids[str(row["model_name"])] = model_id
    mapped = {name for p in parts for name in p.mapping.models.values()}
    for name in mapped - set(ids):
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
    damage: StoreDamage | None = None,
) -> ExportSummary:
    """Write every scored setting of `store` (and, unless `literature` is None, the published
    values of each of its benchmarks, by their cards) as Every Eval Ever records under `out`.
    `retrieved_at` (Unix seconds) stamps the literature records; a store record carries its
    setting's own time. `damage` (`--skip-damaged`): the settings its files hold are left out,
    named in `<out>/left_out.json` and first among the notes."""
    root = Path(out)
    scores = damaged.rows_without_damaged(records(read_frame(store, "scores")), damage)
    frame = damaged.without_damaged(read_frame(store, "settings"), damage)
    settings = records(frame)
    runs = records(read_frame(store, "runs"))
    logs = score_logs(scores, settings, runs, _measured(store, scores), options)
    written = _write(logs, root / SCORES_DIR)
    cited: tuple[str, ...] = ()
    notes: list[str] = []
    damaged.write_left_out(damage, root)
    if literature is not None:
        cards, notes = store_cards(frame, literature.options)
        parts = literature_of(cards, literature.options)
        notes += [p.problem for p in parts if p.problem is not None]
        repo_ids = _repo_ids(settings, parts, literature)
        logs = [
            log
            for p in parts
            for log in literature_logs(p.rows, p.mapping, p.card, repo_ids, retrieved_at)
        ]
        cited = _write(logs, root / LITERATURE_DIR)
    left_out = 0 if options.pilots else _pilots(scores, settings)
    return ExportSummary(str(root), written, cited, left_out, (*damaged.left_out(damage), *notes))
