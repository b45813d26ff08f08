"""The transformers backend's harness semantics, on the tiny model (CPU, seconds)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("transformers")

from workers.backends.hf.engine import EndOfFunctionCriteria, HfBackend  # noqa: E402
from workers.backends.modelprep import build_tiny_model  # noqa: E402
from workers.backends.tokens import count_tokens  # noqa: E402
from workers.spec import (  # noqa: E402
    Dtype,
    EngineSpec,
    GenRequest,
    LengthSemantics,
    ModelSpec,
    Quant,
    SamplingSpec,
    Tuning,
)

GREEDY = SamplingSpec(False, 1.0, 1.0, 0, None)
STOP = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert", "<|endoftext|>")


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny")
    model = ModelSpec("tiny", str(path), "tiny-llama-v1", "tiny", 0.0003, Tuning.INSTRUCT, "yi")
    b = HfBackend()
    info = b.load(
        EngineSpec(
            model,
            "hf",
            Dtype.FP32,
            Quant.NONE,
        )
    )
    assert info.device == "cpu" and info.effective_dtype == "float32"
    yield b
    b.close()


def request(prompt: str, **changes) -> GenRequest:
    base = GenRequest("Python/0", prompt, 1, 1, GREEDY, 96, LengthSemantics.TOTAL, STOP)
    return dataclasses.replace(base, **changes)


def test_greedy_is_deterministic_and_sliced_at_the_prompt(backend):
    prompt = "def add(a, b):"
    first = backend.generate([request(prompt)])
    again = backend.generate([request(prompt)])
    assert first == again
    g = first[0]
    assert g.n_prompt_tokens == count_tokens(backend.tokenizer, prompt)
    assert not g.prompt_truncated and not g.decode_mismatch
    full = backend.tokenizer.decode(
        backend.tokenizer(prompt).input_ids[1:] + list(g.output_token_ids)
    )
    assert full == prompt + g.continuation


def test_length_limit_counts_prompt_and_output_tokens(backend):
    prompt = "def add(a, b):\n    return a + b\n" * 3
    n = count_tokens(backend.tokenizer, prompt)
    g = backend.generate([request(prompt, max_length=n + 5, stop=())])[0]
    assert g.n_output_tokens <= 5
    assert g.n_prompt_tokens + g.n_output_tokens <= n + 5


def test_a_prompt_at_or_over_the_limit_is_truncated_flagged_and_not_generated(backend):
    prompt = "x = 1\n" * 200
    n = count_tokens(backend.tokenizer, prompt)
    over = backend.generate([request(prompt, max_length=64)])[0]
    assert over.prompt_truncated and over.hit_length_limit
    assert over.n_prompt_tokens == n and over.n_output_tokens == 0
    assert over.continuation == ""  # the harness's slice at len(prompt) of a shorter text
    at = backend.generate([request(prompt, max_length=n)])[0]
    assert at.prompt_truncated and at.n_output_tokens == 0


def test_new_tokens_semantics_limits_only_the_output(backend):
    prompt = "def f(x):"
    g = backend.generate(
        [request(prompt, max_length=7, stop=(), length_semantics=LengthSemantics.NEW_TOKENS)]
    )[0]
    assert g.n_output_tokens <= 7 and not g.prompt_truncated


def test_harness_seeding_repeats_and_per_request_seeds_do_not_depend_on_order(backend):
    sampled = SamplingSpec(True, 0.8, 0.95, 0, None)
    reqs = [
        request(f"def f{i}(x):", task_id=f"T/{i}", sampling=sampled, n_samples=2) for i in range(3)
    ]
    assert backend.generate(reqs, global_seed=7) == backend.generate(reqs, global_seed=7)
    assert backend.generate(reqs, global_seed=7) != backend.generate(reqs, global_seed=8)
    seeded = [
        dataclasses.replace(r, sampling=dataclasses.replace(sampled, seed=100 + i), n_samples=1)
        for i, r in enumerate(reqs)
    ]
    forward = backend.generate(seeded)
    backward = backend.generate(list(reversed(seeded)))
    assert forward == list(reversed(backward))


def test_stopping_criterion_waits_for_every_sequence(backend):
    import torch

    tok = backend.tokenizer
    start = 1
    done_row = tok("\n    x\ny", add_special_tokens=False).input_ids
    open_row = tok("\n    x = 1", add_special_tokens=False).input_ids
    width = max(len(done_row), len(open_row))
    pad = tok.pad_token_id
    rows = [
        [0] + done_row + [pad] * (width - len(done_row)),
        [0] + open_row + [pad] * (width - len(open_row)),
    ]
    criterion = EndOfFunctionCriteria(start, STOP, tok)
    assert not criterion(torch.tensor(rows), None).any()
    assert criterion(torch.tensor([rows[0], rows[0]]), None).all()


def test_chat_rendering_uses_the_tokenizer_template(backend):
    text = backend.render_chat([{"role": "user", "content": "Fix bugs in f."}])
    assert text == "<|im_start|>user\nFix bugs in f.<|im_end|>\n<|im_start|>assistant\n"


def test_int8_and_int4_load_and_generate_on_cpu(tmp_path):
    pytest.importorskip("bitsandbytes")
    path = build_tiny_model(tmp_path / "tiny")
    model = ModelSpec("tiny", str(path), "r", "tiny", 0.0003, Tuning.INSTRUCT, "yi")
    for quant in (Quant.INT8, Quant.INT4):
        b = HfBackend()
        info = b.load(EngineSpec(model, "hf", Dtype.FP16, quant))
        assert info.options["quantization"] == quant.value
        g = b.generate([request("def f(x):", max_length=40)])[0]
        assert g.n_output_tokens > 0
        b.close()
