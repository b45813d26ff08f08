"""`seed_policy=harness`: HfBackend's sampling draws from the global random stream exactly as the
BigCode harness does, with the harness's loop (set_seed, then accelerate's prepared DataLoader,
then generate per batch; tests/unit/workers/backends/harness_oracle.py) as the oracle. CPU, the
tiny model; the CUDA side is in tests/gpu/test_harness_seeding_cuda.py."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import torch  # noqa: E402
import transformers  # noqa: E402

from tests.unit.workers.backends.harness_oracle import (  # noqa: E402
    LAYOUTS,
    PROMPTS,
    SAMPLED,
    Recorder,
    assert_rows_match,
    backend_rows,
    harness_kwargs,
    harness_requests,
    rng_snapshot,
    run_harness,
)
from workers.backends.hf import HfOptions
from workers.backends.hf.engine import HfBackend  # noqa: E402
from workers.backends.modelprep import build_tiny_model  # noqa: E402
from workers.spec import (  # noqa: E402
    Dtype,
    EngineSpec,
    ModelSpec,
    Quant,
    Tuning,
)


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny")
    model = ModelSpec("tiny", str(path), "tiny-llama-v1", "tiny", 0.0003, Tuning.INSTRUCT, "yi")
    b = HfBackend()
    b.load(EngineSpec(model, "hf", Dtype.FP32, Quant.NONE, options=HfOptions("cpu")))
    yield b
    b.close()


@pytest.mark.parametrize("seed", [0, 7, 1234])
def test_the_rng_state_at_the_first_generate_call_is_the_harness_loaders(
    backend, monkeypatch, seed
):
    """The oracle is torch's real DataLoader, prepared by accelerate as the harness prepares
    it, iterated up to the first batch after `set_seed(seed, device_specific=True)`."""
    oracle: list[tuple] = []
    run_harness(
        _NoGenerate(),
        backend.tokenizer,
        PROMPTS[:1],
        seed=seed,
        n_samples=1,
        batch_size=1,
        gen_kwargs=harness_kwargs(backend.tokenizer),
        on_first_batch=lambda: oracle.append(rng_snapshot()),
    )
    recorder = Recorder(backend.model.generate)
    monkeypatch.setattr(backend.model, "generate", recorder)
    backend.generate(harness_requests(1, 1)[:1], global_seed=seed)
    assert recorder.states[0] == oracle[0]
    transformers.set_seed(seed)
    assert rng_snapshot() != oracle[0]  # the loader did draw: equality above is not trivial


class _NoGenerate:
    """A model that refuses every prompt, so the oracle loop only iterates its loader."""

    def to(self, device):
        return self

    def generate(self, input_ids, **kwargs):
        raise ValueError(
            f"Input length of input_ids is {input_ids.shape[1]}, but `max_length` is set to "
            f"{kwargs['max_length']}"
        )


@pytest.mark.parametrize(("n_samples", "per_call"), LAYOUTS)
def test_the_rng_state_at_every_generate_call_is_the_harness_loops(
    backend, monkeypatch, n_samples, per_call
):
    """Real sampling, and the states before every call: nothing else draws between batches
    (the truncated prompt, refused by generate in the harness, draws nothing either)."""
    reqs = harness_requests(n_samples, per_call)
    ours = Recorder(backend.model.generate)
    monkeypatch.setattr(backend.model, "generate", ours)
    backend.generate(reqs, global_seed=3)
    theirs = Recorder(ours.generate)
    monkeypatch.setattr(backend.model, "generate", theirs)
    kwargs = harness_kwargs(backend.tokenizer)
    run_harness(
        backend.model,
        backend.tokenizer,
        PROMPTS,
        seed=3,
        n_samples=n_samples,
        batch_size=per_call,
        gen_kwargs=kwargs,
    )
    n_copies = -(-n_samples // per_call)
    assert len(ours.states) == (len(PROMPTS) - 1) * n_copies  # one prompt is at the limit
    assert ours.states == theirs.states


@pytest.mark.parametrize(("n_samples", "per_call"), LAYOUTS)
def test_harness_seeded_samples_equal_the_harness_loop(backend, n_samples, per_call):
    reqs = harness_requests(n_samples, per_call)
    ours = backend_rows(backend, reqs, backend.generate(reqs, global_seed=11))
    theirs = run_harness(
        backend.model,
        backend.tokenizer,
        PROMPTS,
        seed=11,
        n_samples=n_samples,
        batch_size=per_call,
        gen_kwargs=harness_kwargs(backend.tokenizer),
    )
    assert_rows_match(ours, theirs, n_samples)
    # Really sampled: not the greedy output everywhere, and several samples of one problem differ.
    greedy_sampling = dataclasses.replace(SAMPLED, do_sample=False)
    greedy = backend.generate(harness_requests(1, 1, greedy_sampling))
    greedy_rows = backend_rows(backend, reqs, greedy)
    assert any(rows[0] != g[0] for rows, g in zip(ours, greedy_rows, strict=True))
    assert n_samples == 1 or any(len({tuple(r) for r in rows}) > 1 for rows in ours)


def test_per_sample_seeds_are_untouched_by_the_harness_seeding(backend):
    seeded = [
        dataclasses.replace(r, sampling=dataclasses.replace(SAMPLED, seed=100 + i))
        for i, r in enumerate(harness_requests(2, 1))
    ]
    with_global = backend.generate(seeded, global_seed=5)
    torch.manual_seed(999)
    assert backend.generate(seeded) == with_global
