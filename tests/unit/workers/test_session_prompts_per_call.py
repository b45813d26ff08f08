"""A backend that decodes several prompts together (batched transformers) gets a chunk's
requests in one call, so it can refill its batch; one prompt per call gets them one by one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from workers.session import EngineSession
from workers.spec import Generation, GenRequest, LengthSemantics, SamplingSpec

GREEDY = SamplingSpec(do_sample=False, temperature=1.0, top_p=1.0, top_k=0, seed=None)


def request(task_id: str) -> GenRequest:
    return GenRequest(task_id, "def f():", 1, 1, GREEDY, 64, LengthSemantics.TOTAL, ())


class Counting:
    """A backend that records how many requests each call carries."""

    def __init__(self, prompts_per_call: int) -> None:
        self.prompts_per_call = prompts_per_call
        self.calls: list[int] = []

    def load(self, engine):
        return SimpleNamespace(device="cpu")

    def generate(self, requests, global_seed=None):
        self.calls.append(len(requests))
        return [Generation(r.task_id, 0, "x", 1, 2, False, False) for r in requests]


@pytest.mark.parametrize(("per_call", "calls"), [(1, [1] * 5), (4, [5])])
def test_the_chunk_goes_to_a_batching_backend_in_one_call(per_call, calls):
    backend = Counting(per_call)
    engine = SimpleNamespace(
        model=SimpleNamespace(name="m", builder=None), backend="hf", dtype="fp32", quant="none"
    )
    session = EngineSession(engine, {}, backend=backend, batched=False)  # type: ignore[arg-type]
    made = session._generate([request(f"T/{i}") for i in range(5)], seed=None)
    assert [g.task_id for g in made] == [f"T/{i}" for i in range(5)]
    assert backend.calls == calls
    assert session.progress.snapshot()["samples"] == 5
