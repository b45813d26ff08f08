"""`seed_policy=harness` on CUDA: skipped without a GPU (`python -m pytest -m gpu tests/gpu`).

On CUDA the model samples from the CUDA generator. The harness's DataLoader draws its one int64
from the CPU generator, so it changes the CPU stream and not the samples: HfBackend must equal
the harness loop there too (the CPU state included), and its samples must be what plain
`set_seed` without that draw gives (outputs recorded on CUDA before the draw was added stay
valid). The CPU counterpart is tests/unit/workers/backends/test_harness_seeding.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

import transformers  # noqa: E402

from tests.unit.workers.backends.harness_oracle import (  # noqa: E402
    LAYOUTS,
    PROMPTS,
    Recorder,
    assert_rows_match,
    backend_rows,
    harness_kwargs,
    harness_requests,
    rng_snapshot,
    run_harness,
)
from workers.backends.hf import HfOptions  # noqa: E402
from workers.backends.hf import engine as hf  # noqa: E402
from workers.backends.modelprep import build_tiny_model  # noqa: E402
from workers.spec import (  # noqa: E402
    Dtype,
    EngineSpec,
    ModelSpec,
    Quant,
    Tuning,
)

DEVICE = "cuda"


@pytest.fixture(scope="module", params=[Dtype.FP32, Dtype.BF16], ids=lambda d: d.value)
def backend(request, tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny")
    model = ModelSpec("tiny", str(path), "tiny-llama-v1", "tiny", 0.0003, Tuning.INSTRUCT, "yi")
    b = hf.HfBackend()
    b.load(EngineSpec(model, "hf", request.param, Quant.NONE, options=HfOptions(DEVICE)))
    assert b.model.device.type == DEVICE
    yield b
    b.close()


def test_cuda_rng_states_at_every_generate_call_are_the_harness_loops(backend, monkeypatch):
    reqs = harness_requests(4, 2)
    ours = Recorder(backend.model.generate)
    monkeypatch.setattr(backend.model, "generate", ours)
    backend.generate(reqs, global_seed=3)
    theirs = Recorder(ours.generate)
    monkeypatch.setattr(backend.model, "generate", theirs)
    run_harness(
        backend.model,
        backend.tokenizer,
        PROMPTS,
        seed=3,
        n_samples=4,
        batch_size=2,
        gen_kwargs=harness_kwargs(backend.tokenizer),
    )
    assert ours.states and all(state[3] for state in ours.states)  # CUDA states recorded
    assert ours.states == theirs.states


@pytest.mark.parametrize(("n_samples", "per_call"), LAYOUTS)
def test_cuda_harness_seeded_samples_equal_the_harness_loop(backend, n_samples, per_call):
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


def test_on_cuda_the_loaders_cpu_draw_leaves_the_samples_unchanged(backend, monkeypatch):
    reqs = harness_requests(4, 2)
    with_draw = backend.generate(reqs, global_seed=5)
    after_draw = rng_snapshot()
    monkeypatch.setattr(hf, "seed_like_harness", transformers.set_seed)  # the code before it
    without_draw = backend.generate(reqs, global_seed=5)
    assert without_draw == with_draw
    now = rng_snapshot()
    assert now[3] == after_draw[3]  # the CUDA streams were consumed alike
    assert now[2] != after_draw[2]  # only the CPU stream differs
