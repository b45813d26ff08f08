"""The backend interface and the lazy registry of backends.

A backend loads one engine and turns requests into generations. It imports its heavy library
(torch, transformers, vllm) inside its own module only; this module imports none of them, so
resolving a backend name never loads CUDA.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from workers.spec import BackendName, EngineInfo, EngineSpec, Generation, GenRequest


class UnknownBackend(ValueError):
    pass


class BackendUnavailable(RuntimeError):
    """The backend's library is not installed or cannot run on this machine."""


class UnsupportedSetting(ValueError):
    """A setting the backend cannot run (planned out as a skip where it is known in advance)."""


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


BACKENDS: dict[BackendName, str] = {
    BackendName.HF: "workers.backends.hf:HfBackend",
    BackendName.VLLM: "workers.backends.vllm:VllmBackend",
    BackendName.REPLAY: "workers.backends.replay:ReplayBackend",
    BackendName.FAKE: "workers.backends.fake:FakeBackend",
}


def parse_backend_name(name: str) -> BackendName:
    try:
        return BackendName(name)
    except ValueError:
        valid = [b.value for b in BackendName]
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f" Did you mean: {close[0]}?" if close else ""
        raise UnknownBackend(
            f"Unknown backend {name!r}.{hint} Available: {', '.join(valid)}"
        ) from None


def make_backend(name: BackendName | str) -> Backend:
    backend = parse_backend_name(name) if isinstance(name, str) else name
    module_name, class_name = BACKENDS[backend].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BackendUnavailable(f"backend {backend.value!r} cannot be imported: {e}") from e
    instance = getattr(module, class_name)()
    if not isinstance(instance, Backend):
        raise TypeError(f"{BACKENDS[backend]} does not implement the Backend interface")
    return instance
