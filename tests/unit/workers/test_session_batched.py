"""Whether a session hands a backend every chunk's requests in one call is one fact, stated on
the backend's definition (`BackendDefinition.batched`): the driver cuts chunks by it and the
session reads the same fact, from the driver or from the registry, never from the engine
object (workers/session.py)."""

from __future__ import annotations

from types import SimpleNamespace

from workers.session import EngineSession
from workers.spec import Generation


class Counting:
    """A backend object that says nothing about batching: it counts its calls."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def load(self, engine):
        return SimpleNamespace(device="cpu")

    def generate(self, requests, global_seed=None):
        self.calls.append(len(requests))
        return [
            Generation(r.task_id, i, "x", 1, 1, False, False)
            for r in requests
            for i in range(r.n_samples)
        ]

    eos_token = None


def engine(backend: str):
    return SimpleNamespace(
        model=SimpleNamespace(name="m", builder=None),
        backend=backend,
        dtype="fp32",
        quant="none",
    )


def test_the_definition_says_whether_a_session_batches():
    # openai's definition is batched, hf's is not: the same backend object runs either way
    assert EngineSession(engine("openai"), {}, backend=Counting()).batched  # type: ignore[arg-type]
    assert not EngineSession(engine("hf"), {}, backend=Counting()).batched  # type: ignore[arg-type]
    # the driver passes the fact for a backend registered only on its side
    given = EngineSession(engine("toy"), {}, backend=Counting(), batched=True)  # type: ignore[arg-type]
    assert given.batched


def test_a_batched_session_makes_one_call_for_every_chunk(monkeypatch):
    backend = Counting()
    session = EngineSession(engine("openai"), {}, backend=backend)  # type: ignore[arg-type]
    monkeypatch.setattr(session, "_requests", lambda chunk: list(chunk.requests))
    monkeypatch.setattr(
        session, "benchmarks", {"b": SimpleNamespace(samples=lambda *a: [])}, raising=False
    )
    chunks = [
        SimpleNamespace(
            setting_key=k,
            chunk=0,
            setting=SimpleNamespace(benchmark=SimpleNamespace(name="b")),
            requests=[
                SimpleNamespace(task_id=f"{k}{i}", n_samples=1, max_length=8) for i in range(2)
            ],
        )
        for k in ("a", "b")
    ]
    session.run(chunks)  # type: ignore[arg-type]
    assert backend.calls == [4]  # both chunks' requests in one call
