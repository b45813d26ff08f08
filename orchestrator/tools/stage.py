"""`stage`: every model revision a grid needs, downloaded into this machine's Hugging Face
cache, for clusters whose compute nodes cannot reach the Hub.

Run on a login node with `HF_HOME` on the storage the compute nodes share; the runs there set
the same `HF_HOME` and `HF_HUB_OFFLINE=1`, and transformers and vLLM load every file from the
cache (docs/cluster.md, "Compute nodes without internet"). The download is huggingface_hub's own
(`snapshot_download`) at each model's configured revision: a branch is resolved to its commit
and recorded in the cache (`refs/<branch>`), which is what an offline load of that revision
reads. Only the files a backend loads are fetched (`files_to_stage`): a repository's other
formats (TensorFlow, Flax, ONNX, GGUF, a second copy of the weights as `.bin`) are left.
Afterwards `plan` and `doctor` find each model "in the HF cache".

One probe of the Hub first (preflight/hub.py): a Hub that cannot be reached, or HF_HUB_OFFLINE
set here, fails every model at once, without huggingface_hub's retry loop.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.run.api import (
    HubProbe,
    WeightsStatus,
    classify_hub_error,
    load_run_config,
    local_check,
    probe_hub,
)
from workers.spec import ModelSpec

# The weights transformers and vLLM load: one safetensors checkpoint (single or sharded, with
# its index), else the PyTorch one; every other weight format in a repository is left.
SAFETENSORS = re.compile(r"model(-\d+-of-\d+)?\.safetensors")
PYTORCH = re.compile(r"pytorch_model(-\d+-of-\d+)?\.bin")
INDEXES = {"safetensors": "model.safetensors.index.json", "pytorch": "pytorch_model.bin.index.json"}
WEIGHT_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".h5",
    ".msgpack",
    ".ot",
    ".onnx",
    ".onnx_data",
    ".gguf",
    ".tflite",
    ".mlmodel",
    ".npz",
)


class StageStatus(StrEnum):
    STAGED = "staged"  # the revision's files are in the HF cache (downloaded now or before)
    NOT_NEEDED = "not needed"  # built offline or a local folder: nothing comes from the Hub
    FAILED = "failed"  # the Hub said no (repository or revision not found, gated, ...)
    NO_NETWORK = "no network"  # the Hub cannot be reached from here, or HF_HUB_OFFLINE is set


@dataclass(frozen=True)
class StagedModel:
    """One model of the grid and what staging did with it."""

    model: str  # the model config name
    repo_id: str
    revision: str  # as configured (a branch, a tag or a commit)
    status: StageStatus
    detail: str  # the snapshot folder, or why not, naming repo and revision
    commit: str | None = None  # the commit the revision resolved to
    files: tuple[str, ...] = ()  # the files in the cache at that commit

    @property
    def ok(self) -> bool:
        return self.status in (StageStatus.STAGED, StageStatus.NOT_NEEDED)


@dataclass(frozen=True)
class StageReport:
    hub: str  # the endpoint asked (HF_ENDPOINT)
    cache: str  # the HF cache the files went to (HF_HUB_CACHE, by default $HF_HOME/hub)
    models: tuple[StagedModel, ...]

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.models)

    def to_json(self) -> dict[str, Any]:
        return {
            "hub": self.hub,
            "cache": self.cache,
            "ok": self.ok,
            "models": [{**asdict(m), "status": m.status.value} for m in self.models],
        }


def stage(overrides: Sequence[str]) -> StageReport:
    """Stage every model of the grid the overrides describe (`model=a,b`, a grid's model axis,
    an experiment). A grid without a model is a ConfigError."""
    config = load_run_config(overrides)
    if not config.models:
        raise ConfigError("stage needs the grid's models: model=NAME, model=A,B or experiment=NAME")
    return stage_models(config.models, config.preflight.hub_timeout_s)


def stage_models(models: Sequence[ModelSpec], timeout_s: float) -> StageReport:
    """Each distinct model (repo id, revision) once, in the order given; `timeout_s` for the
    probe and for each Hub request. Never raises for a model the Hub refuses or cannot serve:
    the report says which, and why."""
    from huggingface_hub import constants

    unique = list({(m.repo_id, m.revision, m.builder): m for m in models}.values())
    hub: HubProbe | None = None
    staged = []
    for model in unique:
        local = local_check(model)
        if local is not None and local.status is not WeightsStatus.CACHED:
            staged.append(_local(model, local.status, local.detail))
            continue
        hub = hub or probe_hub(timeout_s)
        if not hub.reachable:
            staged.append(_unreachable(model, hub, cached=local is not None))
            continue
        staged.append(download(model, timeout_s))
    return StageReport(constants.ENDPOINT, constants.HF_HUB_CACHE, tuple(staged))


def _local(model: ModelSpec, status: WeightsStatus, detail: str) -> StagedModel:
    if status is WeightsStatus.LOCAL_MISSING:
        return _result(model, StageStatus.FAILED, detail)
    return _result(model, StageStatus.NOT_NEEDED, f"{status.value}: {detail}")


def _unreachable(model: ModelSpec, hub: HubProbe, cached: bool) -> StagedModel:
    where = f"{model.repo_id} at revision {model.revision}"
    if cached:  # a complete snapshot from before: usable, though not checked against the Hub
        return _result(
            model, StageStatus.STAGED, f"{where}: in the HF cache already; {hub.reason()}"
        )
    return _result(model, StageStatus.NO_NETWORK, f"{where}: not staged: {hub.reason()}")


def download(model: ModelSpec, timeout_s: float) -> StagedModel:
    """The files a backend loads of the model's revision, into the HF cache (files already
    there are not fetched again)."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HTTPError

    where = f"{model.repo_id} at revision {model.revision}"
    try:
        info = HfApi().model_info(model.repo_id, revision=model.revision, timeout=timeout_s)
        files = files_to_stage([s.rfilename for s in info.siblings or ()])
        missing = _missing(files)
        if missing:
            return _result(model, StageStatus.FAILED, f"{where} has no {missing}", info.sha)
        folder = snapshot_download(
            model.repo_id,
            revision=model.revision,
            allow_patterns=list(files),
            etag_timeout=timeout_s,
        )
    except (HTTPError, OSError, ValueError) as e:  # the Hub's, the network's, a bad repo id
        status, detail = classify_hub_error(e, model)
        offline = status is WeightsStatus.NO_NETWORK
        return _result(model, StageStatus.NO_NETWORK if offline else StageStatus.FAILED, detail)
    # the snapshot's folder is named by the commit the revision resolved to when it was fetched
    return _result(model, StageStatus.STAGED, folder, Path(folder).name, files)


def _missing(files: Sequence[str]) -> str:
    """What a backend needs that the selection lacks ("" when nothing)."""
    if "config.json" not in files:
        return "config.json (not a transformers model)"
    if not any(SAFETENSORS.fullmatch(f) or PYTORCH.fullmatch(f) for f in files):
        return "weights a backend loads (model*.safetensors or pytorch_model*.bin)"
    return ""


def files_to_stage(names: Sequence[str]) -> tuple[str, ...]:
    """The files of a repository that transformers and vLLM load, sorted: every file at the top
    level that is not a weight file (config, tokenizer, chat template, generation config,
    remote code), and one checkpoint: the safetensors one when there is one (with its index),
    else the PyTorch one. Files in subfolders (other formats, an `original/` checkpoint) are
    not loaded."""
    top = [n for n in names if "/" not in n]
    safetensors = [n for n in top if SAFETENSORS.fullmatch(n)]
    kind = "safetensors" if safetensors else "pytorch"
    weights = safetensors or [n for n in top if PYTORCH.fullmatch(n)]
    other = [n for n in top if not n.endswith(WEIGHT_SUFFIXES) and n not in INDEXES.values()]
    index = [INDEXES[kind]] if INDEXES[kind] in top else []
    return tuple(sorted({*other, *weights, *index}))


def _result(
    model: ModelSpec,
    status: StageStatus,
    detail: str,
    commit: str | None = None,
    files: Sequence[str] = (),
) -> StagedModel:
    return StagedModel(
        model.name, model.repo_id, model.revision, status, detail, commit, tuple(files)
    )


def render_stage(report: StageReport) -> str:
    """One line per model, then how the compute nodes use the cache."""
    lines = [f"Hub: {report.hub}", f"HF cache: {report.cache}"]
    for m in report.models:
        commit = f" (commit {m.commit})" if m.commit and m.commit != m.revision else ""
        files = f", {len(m.files)} files" if m.files else ""
        lines.append(f"  {m.model}: {m.repo_id}@{m.revision}{commit}: {m.status.value}{files}")
        lines.append(f"    {m.detail}")
    if report.ok:
        lines.append(
            "on the compute nodes, set the same HF_HOME (or HF_HUB_CACHE) and HF_HUB_OFFLINE=1: "
            "runs load these revisions from the cache (docs/cluster.md, "
            '"Compute nodes without internet")'
        )
    return "\n".join(lines)


def failures(report: StageReport) -> list[str]:
    """Each model that was not staged, with why: the command's error lines."""
    return [f"{m.model}: {m.status.value}: {m.detail}" for m in report.models if not m.ok]
