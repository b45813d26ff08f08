"""The backend registry: name -> definition, resolved lazily so that naming a backend never
imports another one's library (a definition's module imports no heavy library; its engine
module is imported on a worker by `BackendDefinition.make`). Adding a backend is one line here
(docs/backends.md walks through it)."""

from __future__ import annotations

import difflib
import importlib

from workers.backends.base import Backend, BackendDefinition, UnknownBackend

BACKENDS: dict[str, str] = {
    "hf": "workers.backends.hf:HF",
    "vllm": "workers.backends.vllm:VLLM",
    "openai": "workers.backends.openai:OPENAI",
    "replay": "workers.backends.replay:REPLAY",
    "fake": "workers.backends.fake:FAKE",
}


def get_backend(name: str) -> BackendDefinition:
    """The definition registered under `name`; UnknownBackend (with a suggestion) if none."""
    target = BACKENDS.get(name)
    if target is None:
        close = difflib.get_close_matches(name, list(BACKENDS), n=1)
        hint = f" Did you mean: {close[0]}?" if close else ""
        raise UnknownBackend(f"Unknown backend {name!r}.{hint} Available: {', '.join(BACKENDS)}")
    module_name, attribute = target.split(":")
    definition = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(definition, BackendDefinition) or definition.name != name:
        raise TypeError(f"{target} is not the BackendDefinition of {name!r}")
    return definition


def backend_definitions() -> list[BackendDefinition]:
    """Every registered backend's definition, in registry order."""
    return [get_backend(name) for name in BACKENDS]


def make_backend(name: str) -> Backend:
    """A fresh Backend of the registered `name` (imports its library)."""
    return get_backend(name).make()
