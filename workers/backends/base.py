"""The backend contract: the `Backend` interface a worker drives, and the `BackendDefinition`
the driver plans with.

A backend loads one engine and turns requests into generations. It imports its heavy library
(torch, transformers, vllm) inside its engine module only. Its definition lives in a module that
imports none of them (workers/backends/registry.py names it), so the driver can ask what a
backend needs, runs and keys without loading CUDA: nothing outside workers/backends/ branches
on a backend's name (tests/unit/test_layering.py).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from workers.spec import (
    BackendOptions,
    EngineInfo,
    EngineSpec,
    Generation,
    GenRequest,
    ModelSpec,
    SettingSpec,
)


class UnknownBackend(ValueError):
    pass


class BackendUnavailable(RuntimeError):
    """The backend's library is not installed or cannot run on this machine."""


class UnsupportedSetting(ValueError):
    """A setting the backend cannot run (planned out as a skip where it is known in advance)."""


class BackendOptionError(ValueError):
    """A backend option's value that cannot be used (the message names the key)."""


@runtime_checkable
class Backend(Protocol):
    def load(self, engine: EngineSpec) -> EngineInfo:
        """Load the engine once; returns what was effectively loaded."""
        ...

    def generate(
        self, requests: Sequence[GenRequest], global_seed: int | None = None
    ) -> list[Generation]:
        """Generate every request, in order. `global_seed`, when given, seeds the global RNGs
        once before the first request (the harness's seeding); requests with their own seed
        are seeded individually. Returns n_samples generations per request, in request order.
        """
        ...

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        """The tokenizer's chat template applied to `messages` with the generation prompt."""
        ...

    def stream_state(self) -> bytes | None:
        """The global random streams a harness-seeded setting draws from, as bytes (None: the
        backend has none). A setting committed in chunks stores it after each chunk."""
        ...

    def restore_stream(self, state: bytes) -> None:
        """Continue the global random streams from `stream_state()`'s bytes, exactly."""
        ...

    @property
    def eos_token(self) -> str | None:
        """The tokenizer's eos string (a stop word under harness semantics)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class OptionField:
    """One option of a backend's config block (`<block>.<name>`), checked by the driver at the
    command line's edge like every other option (orchestrator/run/config/options.py)."""

    name: str  # the field of the backend's options dataclass, and the key in its block
    kind: type  # int, float, bool or str
    low: float | None = None  # numbers: the smallest valid value (inclusive unless low_open)
    high: float | None = None  # numbers: the largest valid value (inclusive)
    low_open: bool = False
    nullable: bool = False  # null is valid (the backend then decides, and records what it did)
    choices: tuple[str, ...] = ()  # str: the valid values (empty: any non-empty text)
    why: str = ""  # shown with a range error when the bound has a reason


OptionsT = TypeVar("OptionsT", bound=BackendOptions)


def options_of(engine: EngineSpec, kind: type[OptionsT]) -> OptionsT:
    """The engine's options as its backend's options type; an engine built without options
    (the bare `BackendOptions`) has the type's defaults. Options of another type are a
    programming error of whoever built the EngineSpec: TypeError naming both types."""
    if type(engine.options) is BackendOptions:
        return kind()
    if not isinstance(engine.options, kind):
        raise TypeError(
            f"engine of backend {engine.backend!r} carries {type(engine.options).__name__}, "
            f"not {kind.__name__}"
        )
    return engine.options


class BackendDefinition:
    """What the driver knows about a backend before anything is loaded.

    A backend subclasses this in a module without heavy imports and registers one instance in
    workers/backends/registry.py. The class attributes say what it needs and how it generates;
    the methods say which settings it cannot run, what it adds to the setting key, how its
    typed options are built and bound to a cell, and how a unit's engine is loaded. The
    defaults are those of a backend that needs nothing special.
    """

    name: str = ""  # the registry name: the `backend=` value and the settings rows' `backend`
    engine: str = ""  # "module:Class" implementing Backend, imported on a worker only
    # Its name as an inference engine in exports (Every Eval Ever), and the library under which
    # its engine records its own version (EngineInfo.backend_versions), the version they name.
    export_name: str = ""
    library: str | None = None  # the module that must be importable for it to run here
    distributions: tuple[str, ...] = ()  # libraries whose versions provenance records
    loads_weights: bool = True  # needs the model's weights: preflight checks they can be had
    uses_gpus: bool = True  # an engine reserves the model's GPUs (Ray num_gpus)
    # One call generates many prompts (continuous batching): chunks are cut by count, the
    # cost model batches its decode steps.
    batched: bool = False
    model_free: bool = False  # no model runs (replayed or fake text): nothing to estimate
    # backend=auto tries the eligible backends, highest rank first (None: never chosen).
    auto_rank: int | None = None
    config_block: str | None = None  # the config block of its options (`vllm:`); None: none
    option_fields: tuple[OptionField, ...] = ()
    options_type: type[BackendOptions] = BackendOptions

    def options(self, values: Mapping[str, Any], config: Mapping[str, Any]) -> BackendOptions:
        """Its typed options from its block's checked values (field -> value) and, for a
        backend that reads one, another key of the composed config. BackendOptionError for a
        value no check of `option_fields` can express."""
        return self.options_type(**values)

    def files(
        self, options: BackendOptions, model: ModelSpec, values: Mapping[str, Any]
    ) -> list[str]:
        """Files one cell's engine reads (the driver hashes them; `bind` gets the hashes)."""
        return []

    def bind(
        self,
        options: BackendOptions,
        model: ModelSpec,
        values: Mapping[str, Any],
        hashes: Mapping[str, str],
    ) -> BackendOptions:
        """The options of one cell (`values`: its axis values): what `files` named, bound."""
        return options

    def skip_reason(self, setting: SettingSpec) -> str | None:
        """Why this backend cannot run the setting (a stored skip row), or None."""
        return None

    def key_fields(self, engine: EngineSpec) -> dict[str, Any]:
        """Fields this backend adds to the engine's keyed fields (workers/keys.py): only what
        can change an output; each key of an existing backend is pinned by a test."""
        return {}

    def unit_engine(self, engine: EngineSpec, settings: Sequence[SettingSpec]) -> EngineSpec:
        """The engine as a unit of `settings` loads it (never part of a key)."""
        return engine

    def gpu_requirement(self, engine: EngineSpec) -> str | None:
        """Why the engine cannot run without a GPU whatever the cluster allows (None: it can);
        the option that asks for one, as the user wrote it."""
        return None

    def prompts_per_call(self, engine: EngineSpec) -> int:
        """Prompts one backend call decodes together (batched transformers:
        `generation.batch_size`); 1 for one prompt per call. A setting's chunks are cut in
        multiples of it, so a batch holds the same prompts however a run is chunked."""
        return 1

    def auto_engine(self, engine: EngineSpec, setting: SettingSpec) -> EngineSpec:
        """The engine when `backend=auto` places `setting` on this backend: the fast path may
        take what the setting already gave up for speed (batched transformers where it asks
        for seed_policy=per_sample). Its skip rules then apply to that engine."""
        return engine

    def needs(self, setting: SettingSpec) -> tuple[str, ...]:
        """Optional features of its library the setting needs (`missing_here` names those the
        installation lacks)."""
        return ()

    def missing_here(self) -> dict[str, str]:
        """The optional features its library as installed here lacks -> why, probed without
        importing it; {} when it lacks none, or is not installed (nothing is known of the
        library that will run). A setting that `needs` one is a skip, and `backend=auto`
        places it elsewhere (`plan` and `doctor` say so)."""
        return {}

    def installed(self) -> bool:
        """Its library can be imported here (without importing it)."""
        return self.library is None or importlib.util.find_spec(self.library) is not None

    def make(self) -> Backend:
        """A fresh Backend (imports its engine module: call on a worker)."""
        return backend_at(self.engine, self.name)


def backend_at(path: str, name: str) -> Backend:
    """A fresh instance of the Backend class at `path` ("module:Class"; imports its module).
    The driver resolves a backend's name to its path and ships the path to the worker."""
    module_name, class_name = path.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BackendUnavailable(f"backend {name!r} cannot be imported: {e}") from e
    instance = getattr(module, class_name)()
    if not isinstance(instance, Backend):
        raise TypeError(f"{path} does not implement the Backend interface")
    return instance
