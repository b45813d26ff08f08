"""Batched transformers generation (generation.batch_size > 1) on the real tiny model in fp32:
each sequence is what batch 1 generates (greedy, and sampled from per-sample seeds), stopped
by the harness's rule and limited by its own length semantics on its own, left-padded beside
prompts of other lengths, and a finished call's place is refilled."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import LogitsProcessorList  # noqa: E402

from workers.backends import harness  # noqa: E402
from workers.backends.base import UnsupportedSetting  # noqa: E402
from workers.backends.hf import HfOptions  # noqa: E402
from workers.backends.hf.batched import (  # noqa: E402
    Call,
    Decoder,
    Running,
    check_generation_config,
    decode_calls,
    generate_batched,
)
from workers.backends.hf.engine import HfBackend  # noqa: E402
from workers.backends.modelprep import build_tiny_model  # noqa: E402
from workers.spec import (  # noqa: E402
    Dtype,
    EngineSpec,
    GenRequest,
    LengthSemantics,
    ModelSpec,
    Quant,
    SamplingSpec,
    StopRule,
    Tuning,
)

GREEDY = SamplingSpec(False, 1.0, 1.0, 0, None)
STOP = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert", "<|endoftext|>")


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny")
    model = ModelSpec("tiny", str(path), "tiny-llama-v1", "tiny", 0.0003, Tuning.INSTRUCT, "yi")
    b = HfBackend()
    b.load(EngineSpec(model, "hf", Dtype.FP32, Quant.NONE))
    yield b
    b.close()


@pytest.fixture(scope="module")
def prompts(shared_data) -> list[str]:
    """Eight HumanEvalPack functions of different lengths (the padding differs per batch)."""
    rows = [
        json.loads(line)
        for line in (shared_data / "humanevalpack-python.jsonl").read_text().splitlines()[:8]
    ]
    return [r["prompt"] + r["buggy_solution"] for r in rows]


def request(prompt: str, task_id: str, **changes) -> GenRequest:
    base = GenRequest(task_id, prompt, 1, 1, GREEDY, 320, LengthSemantics.TOTAL, STOP)
    return dataclasses.replace(base, **changes)


def batch_one(backend: HfBackend, requests):
    """What one prompt per call generates (the harness's way)."""
    return backend.generate(requests)


def test_batched_greedy_equals_batch_one_in_fp32(backend, prompts):
    requests = [request(p, f"Python/{i}") for i, p in enumerate(prompts)]
    expected = batch_one(backend, requests)
    got = generate_batched(backend.model, backend.tokenizer, requests, 4)
    assert got == expected  # ids, continuations, counts and flags, every sequence
    assert len({g.n_output_tokens for g in got}) > 2  # they stopped at different lengths


def test_batched_sampling_draws_what_batch_one_draws_from_each_seed(backend, prompts):
    sampled = SamplingSpec(True, 0.8, 0.95, 0, None)
    requests = [
        request(p, f"Python/{i}", sampling=dataclasses.replace(sampled, seed=1000 + i))
        for i, p in enumerate(prompts)
    ]
    expected = batch_one(backend, requests)
    # one call at a time: the shapes of batch 1, so its logits and its draws, exactly
    assert generate_batched(backend.model, backend.tokenizer, requests, 1) == expected
    # batched, in any order: each call's first token comes from its own prefill (batch 1's
    # logits) and its own generator, so it is batch 1's; later steps see padded shapes, whose
    # rounding can move a draw across a token boundary (docs/backends.md, compare-backends)
    for size, order in ((8, 1), (3, -1)):
        got = generate_batched(backend.model, backend.tokenizer, requests[::order], size)
        for mine, theirs in zip(got, expected[::order], strict=True):
            assert mine.output_token_ids[:1] == theirs.output_token_ids[:1]
            assert mine.task_id == theirs.task_id and mine.n_prompt_tokens == theirs.n_prompt_tokens
    assert len({g.output_token_ids[:1] for g in expected}) > 1  # the draws are not all alike


def test_several_samples_per_call_are_the_calls_of_batch_one(backend, prompts):
    sampled = SamplingSpec(True, 0.8, 0.95, 0, 77)
    requests = [
        request(p, f"Python/{i}", sampling=sampled, n_samples=3, samples_per_call=2, max_length=200)
        for i, p in enumerate(prompts[:3])
    ]
    got = generate_batched(backend.model, backend.tokenizer, requests, 1)
    expected = batch_one(backend, requests)
    assert [g.sample_index for g in got] == [0, 1, 2] * 3
    # batch 1 stops a call only when all its sequences are done; batched stops each at its
    # own end: the same tokens up to there (one call at a time: batch 1's shapes)
    for mine, theirs in zip(got, expected, strict=True):
        n = mine.n_output_tokens
        assert theirs.output_token_ids[:n] == mine.output_token_ids


def test_each_sequence_stops_on_its_own_where_the_harness_would(backend, prompts):
    requests = [request(p, f"Python/{i}") for i, p in enumerate(prompts)]
    got = generate_batched(backend.model, backend.tokenizer, requests, 8)
    stop = harness.stop_words(requests[0], backend.tokenizer.eos_token)
    for g in got:
        ids = list(g.output_token_ids)
        # never a token past the first prefix the harness's criterion holds on ...
        cut = harness.harness_cut(backend.tokenizer, ids, stop, StopRule.HARNESS_PYTHON)
        assert cut == len(ids)
        # ... which holds at the end unless the length limit came first
        text = backend.tokenizer.decode(ids)
        assert g.hit_length_limit or harness.continuation_is_done(text, stop)
    assert any(not g.hit_length_limit for g in got)
    assert len({g.n_output_tokens for g in got}) > 2  # they ended at different lengths


def test_each_sequence_has_its_own_length_limit(backend, prompts):
    # total: prompt + output <= max_length for prompts of different lengths; new_tokens: the
    # output alone; a prompt at the total limit is not generated from
    lengths = [len(backend.tokenizer(p).input_ids) for p in prompts[:6]]
    limit = sorted(lengths)[3] + 6
    words = {"stop": (), "stop_rule": StopRule.STOP_WORDS}  # only the eos ends one early
    total = [request(p, f"T/{i}", max_length=limit, **words) for i, p in enumerate(prompts[:6])]
    new = [
        request(p, f"N/{i}", max_length=5, length_semantics=LengthSemantics.NEW_TOKENS, **words)
        for i, p in enumerate(prompts[:6])
    ]
    requests = total + new
    got = generate_batched(backend.model, backend.tokenizer, requests, 6)
    assert got == batch_one(backend, requests)
    for g, n in zip(got[:6], lengths, strict=True):
        if n >= limit:
            assert g.prompt_truncated and g.n_output_tokens == 0
        else:
            assert g.n_prompt_tokens + g.n_output_tokens <= limit
            assert g.hit_length_limit == (g.n_prompt_tokens + g.n_output_tokens == limit)
    assert any(g.hit_length_limit and not g.prompt_truncated for g in got[:6])
    assert all(g.n_output_tokens <= 5 for g in got[6:])
    assert any(g.n_output_tokens == 5 and g.hit_length_limit for g in got[6:])


def test_prompts_are_left_padded_under_a_mask(backend, prompts):
    decoder = Decoder(backend.model, backend.tokenizer, 1.0)
    short, long = sorted(prompts[:2], key=len)
    for i, text in enumerate((long, short)):
        req = request(text, f"P/{i}", max_length=2048)
        prompt = harness.tokenize_prompt(backend.tokenizer, req, 2048)
        decoder.admit(Running(Call(i, prompt, 1, None), req, STOP, None, LogitsProcessorList()))
    n_long, n_short = (len(backend.tokenizer(t).input_ids) for t in (long, short))
    assert decoder.mask.shape == (2, n_long)
    assert decoder.mask[0].tolist() == [1] * n_long
    assert decoder.mask[1].tolist() == [0] * (n_long - n_short) + [1] * n_short
    keys = decoder.cache.layers[0].keys
    assert keys.shape[0] == 2 and keys.shape[-2] == n_long
    assert torch.count_nonzero(keys[1, :, : n_long - n_short]) == 0  # the padding holds nothing


def test_a_finished_call_hands_its_place_to_the_next(backend, prompts):
    requests = [request(p, f"Python/{i}") for i, p in enumerate(prompts[:7])]
    contexts = [harness.tokenize_prompt(backend.tokenizer, r, 2048) for r in requests]
    calls = [Call(i, p, 1, None) for i, p in enumerate(contexts)]
    outputs = decode_calls(backend.model, backend.tokenizer, calls, requests, 2)
    expected = batch_one(backend, requests)
    assert any(c.prompt.max_tokens == 0 for c in calls) and len(outputs) < len(calls)
    got = [outputs[c][0] if c.prompt.max_tokens else [] for c in calls]
    assert got == [list(g.output_token_ids) for g in expected]


def test_a_sampled_request_without_a_seed_is_refused(backend):
    harness_seeded = request("def f(x):", "x", sampling=SamplingSpec(True, 0.8, 0.95, 0, None))
    with pytest.raises(UnsupportedSetting, match="global stream"):
        generate_batched(backend.model, backend.tokenizer, [harness_seeded], 4)


def test_a_generation_config_field_not_reproduced_is_refused():
    assert check_generation_config(SimpleNamespace(repetition_penalty=1.2)) == 1.2
    assert check_generation_config(SimpleNamespace(no_repeat_ngram_size=None)) == 1.0
    with pytest.raises(UnsupportedSetting, match="no_repeat_ngram_size=3"):
        check_generation_config(SimpleNamespace(no_repeat_ngram_size=3))


def test_the_backend_batches_when_its_engine_asks(backend, prompts):
    engine = dataclasses.replace(backend.engine, options=HfOptions(batch_size=4))
    batched = HfBackend()
    info = batched.load(engine)
    assert batched.prompts_per_call == 4 and info.options["batch_size"] == "4"
    requests = [request(p, f"Python/{i}") for i, p in enumerate(prompts[:5])]
    assert batched.generate(requests) == batch_one(backend, requests)
    batched.close()
