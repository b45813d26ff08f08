"""What an engine reports of the backend call in flight (its samples, their token budget, how
long it has run), which the driver's ETA bounds the samples still running with
(tests/unit/orchestrator/run/execute/test_progress.py)."""

from __future__ import annotations

from types import SimpleNamespace

from workers.session import EngineSession, SessionProgress
from workers.spec import Generation, GenRequest, LengthSemantics, SamplingSpec

GREEDY = SamplingSpec(do_sample=False, temperature=0.0, top_p=1.0, top_k=0, seed=None)


def request(task_id: str, n_samples: int, max_length: int) -> GenRequest:
    return GenRequest(
        task_id=task_id,
        prompt="def f():",
        n_samples=n_samples,
        samples_per_call=n_samples,
        sampling=GREEDY,
        max_length=max_length,
        length_semantics=LengthSemantics.NEW_TOKENS,
        stop=(),
    )


class Recording:
    """A backend that records the engine's progress while it generates."""

    def __init__(self) -> None:
        self.progress: SessionProgress | None = None
        self.seen: list[dict] = []

    def load(self, engine):
        return SimpleNamespace(device="cpu")

    def generate(self, requests, global_seed=None):
        assert self.progress is not None
        self.seen.append(self.progress.snapshot())
        return [
            Generation(r.task_id, i, "x", 1, 7, False, False)
            for r in requests
            for i in range(r.n_samples)
        ]


def test_each_backend_call_is_reported_in_flight_with_its_token_budget():
    backend, progress = Recording(), SessionProgress()
    backend.progress = progress
    engine = SimpleNamespace(
        model=SimpleNamespace(name="m", builder=None), backend="fake", dtype="fp32", quant="none"
    )
    session = EngineSession(engine, {}, backend=backend, progress=progress)  # type: ignore[arg-type]
    made = session._generate([request("a", 1, 512), request("b", 3, 2048)], seed=None)
    assert len(made) == 4
    # one request per call: its samples, each at most max_length output tokens
    assert [(s["running"], s["running_budget"]) for s in backend.seen] == [(1, 512), (3, 6144)]
    assert all(0 <= s["running_s"] < 60 for s in backend.seen)
    after = progress.snapshot()
    assert (after["running"], after["running_budget"], after["running_s"]) == (0, 0, 0.0)
    assert (after["samples"], after["tokens"]) == (4, 28)


def test_a_batched_call_reports_every_request_in_it():
    progress = SessionProgress()
    progress.calling([request("a", 2, 100), request("b", 5, 300)])
    snapshot = progress.snapshot()
    assert (snapshot["running"], snapshot["running_budget"]) == (7, 2 * 100 + 5 * 300)
    progress.add(7, 70)
    assert progress.snapshot()["running"] == 0
