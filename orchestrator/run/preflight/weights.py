"""Can each model's weights be had? Checked on the driver before Ray starts or a GPU is held.

In order: a model with a `builder` is built offline on first use (always available); a
`repo_id` that is a folder is used as is; a Hub id is fine when its config and weights are in
this machine's Hugging Face cache at the revision; otherwise a HEAD request for its
`config.json` at the revision tells downloadable from "repository not found", "revision not
found", gated, and no network. huggingface_hub raises a distinct exception for each, so the
check classifies its real exceptions rather than status codes of its own. HF_ENDPOINT,
HF_HUB_OFFLINE, HF_HUB_CACHE and HF_TOKEN are honoured by huggingface_hub as it reads them.
Before the first Hub request, one probe (preflight/hub.py) tells an unreachable Hub apart:
then every model the cache lacks is "no network" at once, without a request.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum

from orchestrator.run.preflight.hub import HubProbe, probe_hub
from workers.spec import ModelSpec

MAX_PARALLEL_CHECKS = 8  # Hub requests in flight: a grid of 11 models takes one timeout, not 11
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


class WeightsStatus(StrEnum):
    BUILT_OFFLINE = "built offline"  # a builder makes the folder on first use
    LOCAL = "present locally"  # repo_id is a folder with a config.json
    CACHED = "in the HF cache"  # config and every weight file cached at the revision
    DOWNLOADABLE = "downloadable"  # the Hub has config.json at the revision for this token
    LOCAL_MISSING = "local folder not found"  # repo_id looks like a path that does not exist
    REPO_NOT_FOUND = "repository not found"  # no such repo (or private without a token)
    REVISION_NOT_FOUND = "revision not found"  # the repo exists, the revision does not
    GATED = "gated"  # exists; needs an accepted licence and HF_TOKEN
    NO_NETWORK = "no network"  # the Hub cannot be reached (or HF_HUB_OFFLINE=1)
    HUB_ERROR = "hub error"  # any other answer of the Hub (5xx, ...)


AVAILABLE = frozenset(
    {
        WeightsStatus.BUILT_OFFLINE,
        WeightsStatus.LOCAL,
        WeightsStatus.CACHED,
        WeightsStatus.DOWNLOADABLE,
    }
)


@dataclass(frozen=True)
class WeightsCheck:
    """Whether one model's weights can be had, and where from."""

    model: str  # the model config name
    repo_id: str
    revision: str
    status: WeightsStatus
    detail: str  # what was found, or the error, naming repo and revision

    @property
    def available(self) -> bool:
        return self.status in AVAILABLE


def looks_like_path(repo_id: str) -> bool:
    """A Hub id is `name` or `namespace/name`; anything absolute, relative (./, ../, ~) or
    with more than one slash is a folder."""
    return (
        os.path.isabs(repo_id)
        or repo_id.startswith((".", "~"))
        or repo_id.count("/") > 1
        or os.sep != "/"
        and os.sep in repo_id
    )


def check_weights(model: ModelSpec, timeout_s: float) -> WeightsCheck:
    """See the module docstring; never raises for a missing or unreachable model."""
    return check_all([model], timeout_s)[0]


def local_check(model: ModelSpec) -> WeightsCheck | None:
    """What this machine alone can say (built, a folder, the HF cache); None: ask the Hub."""

    def result(status: WeightsStatus, detail: str) -> WeightsCheck:
        return WeightsCheck(model.name, model.repo_id, model.revision, status, detail)

    if model.builder is not None:
        return result(WeightsStatus.BUILT_OFFLINE, f"built on first use by builder {model.builder}")
    if os.path.isfile(os.path.join(model.repo_id, "config.json")):
        return result(WeightsStatus.LOCAL, model.repo_id)
    if looks_like_path(model.repo_id) or os.path.isdir(model.repo_id):
        return result(
            WeightsStatus.LOCAL_MISSING,
            f"{model.repo_id} is not a model folder (no config.json) and no builder is set",
        )
    cached = cached_snapshot(model.repo_id, model.revision)
    if cached is not None:
        return result(WeightsStatus.CACHED, cached)
    return None


def cached_snapshot(repo_id: str, revision: str) -> str | None:
    """The cached snapshot folder when config.json and every weight file of the revision are
    in the HF cache (a sharded checkpoint: every shard its index names), else None."""
    from huggingface_hub import try_to_load_from_cache

    config = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    if not isinstance(config, str):
        return None
    folder = os.path.dirname(config)
    for name in WEIGHT_FILES:
        if os.path.isfile(os.path.join(folder, name)):
            return folder
    for name in WEIGHT_INDEXES:
        index = os.path.join(folder, name)
        if os.path.isfile(index):
            try:
                with open(index, encoding="utf-8") as fh:
                    shards = set(json.load(fh)["weight_map"].values())
            except (OSError, ValueError, KeyError):
                return None
            if all(os.path.isfile(os.path.join(folder, s)) for s in shards):
                return folder
    return None


def hub_check(model: ModelSpec, timeout_s: float) -> WeightsCheck:
    """HEAD `config.json` of the repo at the revision; its exception says which case it is."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HTTPError

    try:
        url = hf_hub_url(model.repo_id, "config.json", revision=model.revision)
        get_hf_file_metadata(url, timeout=timeout_s)
    except (HTTPError, OSError, ValueError) as e:  # the Hub's, the network's, a bad repo id
        status, detail = classify_hub_error(e, model)
    else:
        status = WeightsStatus.DOWNLOADABLE
        detail = f"{_where(model)} (the engine downloads it on first use)"
    return WeightsCheck(model.name, model.repo_id, model.revision, status, detail)


def unreachable(model: ModelSpec, hub: HubProbe) -> WeightsCheck:
    """A model the cache lacks, when the probe found the Hub offline or unreachable."""
    where = f"{_where(model)}: not in the HF cache and {hub.reason()}"
    return WeightsCheck(model.name, model.repo_id, model.revision, WeightsStatus.NO_NETWORK, where)


def _where(model: ModelSpec) -> str:
    return f"{model.repo_id} at revision {model.revision}"


def classify_hub_error(error: Exception, model: ModelSpec) -> tuple[WeightsStatus, str]:
    """huggingface_hub's exception -> status and a message naming the repo and revision."""
    from huggingface_hub import errors

    where = _where(model)
    if isinstance(error, errors.GatedRepoError):  # before RepositoryNotFoundError: a subclass
        return WeightsStatus.GATED, (
            f"{where} is gated: accept its licence on the Hub and set HF_TOKEN (workers too)"
        )
    if isinstance(error, errors.RepositoryNotFoundError):
        return WeightsStatus.REPO_NOT_FOUND, (
            f"repository {model.repo_id} (revision {model.revision}) not found on the Hub "
            "(or private: set HF_TOKEN)"
        )
    if isinstance(error, errors.RevisionNotFoundError):
        return WeightsStatus.REVISION_NOT_FOUND, (
            f"revision {model.revision} not found in repository {model.repo_id}"
        )
    if isinstance(error, errors.RemoteEntryNotFoundError):
        return WeightsStatus.REPO_NOT_FOUND, f"{where} has no config.json"
    if isinstance(error, errors.OfflineModeIsEnabled):
        return WeightsStatus.NO_NETWORK, f"{where}: not in the HF cache and HF_HUB_OFFLINE is set"
    if isinstance(error, errors.HfHubHTTPError):
        return WeightsStatus.HUB_ERROR, f"{where}: the Hub answered {_first_line(error)}"
    if isinstance(error, errors.HFValidationError):
        return WeightsStatus.REPO_NOT_FOUND, f"{model.repo_id!r} is not a valid Hub repo id"
    if isinstance(error, (errors.HTTPError, OSError)):  # transport: refused, DNS, timeout
        return WeightsStatus.NO_NETWORK, (
            f"{where}: not in the HF cache and the Hub cannot be reached "
            f"({type(error).__name__}: {_first_line(error)})"
        )
    return WeightsStatus.HUB_ERROR, f"{where}: {type(error).__name__}: {_first_line(error)}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def check_all(models: Sequence[ModelSpec], timeout_s: float) -> tuple[WeightsCheck, ...]:
    """The check of each distinct model (by repo id and revision), in the order given: what
    this machine has first, then one probe of the Hub (`timeout_s`) when any model needs it,
    then the Hub's answers in parallel, or "no network" for all when the probe failed."""
    unique = list({(m.repo_id, m.revision, m.builder): m for m in models}.values())
    found = [local_check(m) for m in unique]
    remote = [m for m, check in zip(unique, found, strict=True) if check is None]
    if not remote:
        return tuple(c for c in found if c is not None)
    hub = probe_hub(timeout_s)
    if hub.reachable:
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_CHECKS, len(remote))) as pool:
            answers = iter(pool.map(lambda m: hub_check(m, timeout_s), remote))
    else:
        answers = iter([unreachable(m, hub) for m in remote])
    return tuple(c if c is not None else next(answers) for c in found)
