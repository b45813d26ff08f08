"""`reprogrid export --format mlflow`: every scored setting of a store as an MLflow run, in one
experiment per store (docs/report.md, "Experiment trackers").

A run holds the setting's axes and model revision as parameters, pass@1 with its bootstrap
interval and the counts as metrics, the setting key and the run id that wrote it as tags, and
the harness's `generations.json` of the setting as an artifact. A run is found again by its
`reprogrid.setting_key` tag, so exporting again updates the runs (metrics get a new point,
the artifact is replaced) and never adds a second run for a setting.

`tracked_runs` is pure (rows in, runs out); `export_mlflow` talks to MLflow, imported only
there (it takes seconds to import, and it is an optional extra).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.analysis.intervals import ProblemCounts, pass1_interval
from orchestrator.report.tables.data import ReportOptions
from orchestrator.report.tables.labels import axes_label, setting_axes

SETTING_TAG = "reprogrid.setting_key"
# + a setting key (or a damaged file of no setting): why this export left it out (the
# experiment's tags; docs/report.md, "Damaged files")
LEFT_OUT_TAG = "reprogrid.left_out."
ARTIFACT_DIR = "harness"
ARTIFACT_NAME = "generations.json"
PARAMS = (
    "model_name",
    "model_repo_id",
    "model_revision",
    "benchmark",
    "variant",
    "template",
    "template_kind",
    "decoding",
    "temperature",
    "top_p",
    "top_k",
    "max_length",
    "length_semantics",
    "precision",
    "dtype",
    "quant",
    "backend",
    "n_samples",
    "seed",
    "seed_policy",
    "limit",
)
COUNTS = (
    "n_problems",
    "n_samples",
    "n_passed",
    "n_prompt_truncated",
    "n_hit_length_limit",
    "n_decode_mismatch",
    "n_timeout",
    "n_unscorable",
)


class TrackerError(ValueError):
    """MLflow refused the export (the message says what to change)."""


@dataclass(frozen=True)
class TrackedRun:
    setting_key: str
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]


@dataclass(frozen=True)
class MlflowSummary:
    tracking_uri: str
    experiment: str
    experiment_id: str
    created: tuple[str, ...]  # setting keys that got a new run
    updated: tuple[str, ...]  # setting keys whose run was updated


def metric_name(metric: str) -> str:
    """ "pass@1" -> "pass_at_1" (MLflow names allow letters, digits, _ - . / and spaces)."""
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", metric.replace("@", "_at_"))


def _present(value: Any) -> bool:
    return value is not None and value == value


def tracked_runs(
    scores: Sequence[Mapping[str, Any]],
    settings: Sequence[Mapping[str, Any]],
    counts: Mapping[str, ProblemCounts],
    options: ReportOptions,
) -> list[TrackedRun]:
    """One run per scored setting, in setting-key order. `counts`: per pass@1 setting its
    per-problem counts (the interval is the report's bootstrap, with `options`)."""
    by_key = {str(s["setting_key"]): s for s in settings}
    out = []
    for score in sorted(scores, key=lambda s: str(s["setting_key"])):
        key = str(score["setting_key"])
        setting = {**score, **by_key.get(key, {})}
        params = {p: str(setting[p]) for p in PARAMS if _present(setting.get(p))}
        metrics = {c: float(score[c]) for c in COUNTS if _present(score.get(c))}
        metrics[metric_name(str(score["metric"]))] = float(score["value"])
        if key in counts:
            interval = pass1_interval(
                counts[key], options.n_resamples, options.confidence, options.seed
            )
            metrics.update(pass_at_1_ci_low=interval.low, pass_at_1_ci_high=interval.high)
        tags = {
            SETTING_TAG: key,
            "reprogrid.run_id": str(setting.get("run_id") or ""),
            "reprogrid.status": str(setting.get("status") or ""),
            "reprogrid.interval": f"{options.confidence:g} bootstrap, "
            f"{options.n_resamples} resamples, seed {options.seed}",
        }
        label = f"{setting.get('model_name')} {axes_label(setting_axes(setting))}"
        out.append(TrackedRun(key, f"{label} {key[:12]}", params, metrics, tags))
    return out


def _existing(client, experiment_id: str) -> dict[str, str]:
    """setting key -> run id of the experiment's runs that carry the setting tag."""
    found: dict[str, str] = {}
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string=f"tags.`{SETTING_TAG}` != ''", page_token=token
        )
        for run in page:
            found.setdefault(run.data.tags[SETTING_TAG], run.info.run_id)
        token = page.token
        if not token:
            return found


def _tag_left_out(client, experiment_id: str, left_out: Mapping[str, str]) -> None:
    """An experiment tag per name this export left out; an earlier export's that this one did
    not leave out are removed, so the tags always speak for the last export."""
    for name in client.get_experiment(experiment_id).tags:
        if name.startswith(LEFT_OUT_TAG) and name[len(LEFT_OUT_TAG) :] not in left_out:
            client.delete_experiment_tag(experiment_id, name)
    for name, why in left_out.items():
        client.set_experiment_tag(experiment_id, LEFT_OUT_TAG + name, why)


def _experiment(client, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return str(experiment.experiment_id)
    return str(client.create_experiment(name))


ALLOW_FILE_STORE = "MLFLOW_ALLOW_FILE_STORE"
URI_HINT = (
    "choose the tracking store with --tracking-uri URI: a tracking server, http://HOST:5000; a "
    f"folder, file:///PATH, with {ALLOW_FILE_STORE}=true; without the flag, MLFLOW_TRACKING_URI "
    "or else the folder mlruns in the store's report folder"
)


@contextlib.contextmanager
def _file_store_allowed(allowed: bool) -> Iterator[None]:
    """MLflow 3 refuses its file store unless MLFLOW_ALLOW_FILE_STORE is true, a variable it
    reads whenever it opens one: set for the export only, as it was afterwards."""
    before = os.environ.get(ALLOW_FILE_STORE)
    if allowed:
        os.environ[ALLOW_FILE_STORE] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ALLOW_FILE_STORE, None)
        else:
            os.environ[ALLOW_FILE_STORE] = before


def _hint(message: str, tracking_uri: str) -> str:
    """What to do about MLflow's refusal: always how to choose another tracking store."""
    hints = []
    if ALLOW_FILE_STORE in message:
        hints.append(f"a file: tracking URI needs {ALLOW_FILE_STORE}=true with this MLflow")
    if tracking_uri.split(":", 1)[0] in ("sqlite", "mysql", "postgresql", "mssql"):
        hints.append(
            "a database URI needs the full mlflow package (SQLAlchemy), not the skinny client "
            "of reprogrid[mlflow]"
        )
    return "; ".join([*hints, URI_HINT])


def export_mlflow(
    runs: Sequence[TrackedRun],
    tracking_uri: str,
    experiment: str,
    generations_of: Callable[[str], list[list[str]]],
    timestamp_ms: int,
    allow_file_store: bool = False,
    left_out: Mapping[str, str] | None = None,
) -> MlflowSummary:
    """Log `runs` into `experiment` (created if missing) at `tracking_uri`.
    `generations_of(key)` gives the harness entries of a setting (its artifact);
    `allow_file_store`: open a file: tracking URI although MLflow 3 keeps that store in
    maintenance mode (reprogrid's default store is one; a URI the user names is MLflow's call).
    `left_out`: what the export left out (a setting key or file -> why), as experiment tags
    LEFT_OUT_TAG + name, which replace an earlier export's."""
    try:
        from mlflow.exceptions import MlflowException
    except ImportError as e:
        raise TrackerError(
            "export --format mlflow needs MLflow: pip install 'reprogrid[mlflow]'"
        ) from e
    try:
        with _file_store_allowed(allow_file_store):
            return _log_runs(
                runs, tracking_uri, experiment, generations_of, timestamp_ms, left_out or {}
            )
    except MlflowException as e:
        raise TrackerError(f"MLflow at {tracking_uri}: {e} ({_hint(str(e), tracking_uri)})") from e


def _log_runs(
    runs: Sequence[TrackedRun],
    tracking_uri: str,
    experiment: str,
    generations_of: Callable[[str], list[list[str]]],
    timestamp_ms: int,
    left_out: Mapping[str, str],
) -> MlflowSummary:
    """Create or update one run per setting (found again by its setting tag)."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    experiment_id = _experiment(client, experiment)
    _tag_left_out(client, experiment_id, left_out)
    existing = _existing(client, experiment_id)
    created, updated = [], []
    for run in runs:
        run_id = existing.get(run.setting_key)
        if run_id is None:
            run_id = client.create_run(experiment_id, run_name=run.name).info.run_id
            created.append(run.setting_key)
        else:
            updated.append(run.setting_key)
        client.log_batch(
            run_id,
            metrics=[Metric(k, v, timestamp_ms, 0) for k, v in run.metrics.items()],
            params=[Param(k, v) for k, v in run.params.items()],
            tags=[RunTag(k, v) for k, v in {**run.tags, "mlflow.runName": run.name}.items()],
        )
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / ARTIFACT_NAME
            path.write_text(json.dumps(generations_of(run.setting_key)), encoding="utf-8")
            client.log_artifact(run_id, str(path), ARTIFACT_DIR)
        client.set_terminated(run_id, "FINISHED")
    return MlflowSummary(
        client.tracking_uri, experiment, experiment_id, tuple(created), tuple(updated)
    )
