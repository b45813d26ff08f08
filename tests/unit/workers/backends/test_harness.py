"""The harness's generation semantics (harness.py) and the shared tokenizer setup (tokens.py):
pure rules as tables, the tokenizer-bound ones on the tiny model's tokenizer (CPU, seconds)."""

from __future__ import annotations

import dataclasses

import pytest

from workers.backends.harness import (
    PreparedPrompt,
    build_generation,
    continuation_is_done,
    decode_continuation,
    first_done_index,
    harness_cut,
    hit_length_limit,
    prepare_prompt,
    stop_words,
    tokenize_prompt,
)
from workers.spec import GenRequest, LengthSemantics, ModelSpec, SamplingSpec, StopRule, Tuning

GREEDY = SamplingSpec(False, 1.0, 1.0, 0, None)
STOP = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert", "<|endoftext|>")


def request(prompt: str = "p", **changes) -> GenRequest:
    base = GenRequest("Python/0", prompt, 1, 1, GREEDY, 96, LengthSemantics.TOTAL, STOP)
    return dataclasses.replace(base, **changes)


# -- pure rules ----------------------------------------------------------------------------------

DONE_CASES = [
    ("\n    x = 1", StopRule.HARNESS_PYTHON, False),
    ("\n    x = 1\ny", StopRule.HARNESS_PYTHON, True),
    ("\n    a\n\ndef", StopRule.HARNESS_PYTHON, True),
    ("", StopRule.HARNESS_PYTHON, False),
    ("  <|endoftext|>", StopRule.HARNESS_PYTHON, True),
    ("\n\t\n    ", StopRule.HARNESS_PYTHON, False),
    ("first line", StopRule.HARNESS_PYTHON, True),  # the first line counts too
    ("first line\nprose", StopRule.STOP_WORDS, False),
    ("answer\ndef f", StopRule.STOP_WORDS, True),
]


@pytest.mark.parametrize(("text", "rule", "done"), DONE_CASES)
def test_continuation_is_done_is_the_harness_check_fn(text, rule, done):
    assert continuation_is_done(text, STOP, rule) is done


@pytest.mark.parametrize(
    ("stop", "eos", "expected"),
    [
        (("\ndef",), "</s>", ("\ndef", "</s>")),
        (("\ndef", "</s>"), "</s>", ("\ndef", "</s>")),  # not twice
        (("\ndef",), None, ("\ndef",)),
        ((), "", ()),
    ],
)
def test_stop_words_append_the_tokenizers_eos_once(stop, eos, expected):
    assert stop_words(request(stop=stop), eos) == expected


@pytest.mark.parametrize(
    ("done_from", "n", "expected"),
    [(None, 10, 10), (1, 10, 1), (7, 10, 7), (10, 10, 10), (None, 0, 0), (3, 3, 3)],
)
def test_first_done_index_finds_the_first_done_prefix(done_from, n, expected):
    calls = []

    def is_done(k):
        calls.append(k)
        return done_from is not None and k >= done_from

    assert first_done_index(n, is_done) == expected
    assert len(calls) <= 8  # logarithmic, not one decode per token


@pytest.mark.parametrize(
    ("n_prompt", "max_length", "semantics", "expected"),
    [
        (10, 64, LengthSemantics.TOTAL, PreparedPrompt(tuple(range(10)), 10, False, 54)),
        (64, 64, LengthSemantics.TOTAL, PreparedPrompt(tuple(range(64)), 64, True, 0)),
        (80, 64, LengthSemantics.TOTAL, PreparedPrompt(tuple(range(16, 80)), 80, True, 0)),
        (80, 100, LengthSemantics.NEW_TOKENS, PreparedPrompt(tuple(range(80)), 80, False, 100)),
        (
            80,
            2000,
            LengthSemantics.NEW_TOKENS,
            PreparedPrompt(tuple(range(32, 80)), 80, True, 2000),
        ),
    ],
)
def test_prepare_prompt_follows_the_harness_length_rules(n_prompt, max_length, semantics, expected):
    full = list(range(n_prompt))
    req = request(max_length=max_length, length_semantics=semantics)
    assert prepare_prompt(full, lambda limit: full[-limit:], req, 2048) == expected


@pytest.mark.parametrize(
    ("semantics", "prompt", "n_output", "hit"),
    [
        (LengthSemantics.TOTAL, PreparedPrompt((1,) * 10, 10, False, 54), 53, False),
        (LengthSemantics.TOTAL, PreparedPrompt((1,) * 10, 10, False, 54), 54, True),
        (LengthSemantics.TOTAL, PreparedPrompt((1,) * 64, 80, True, 0), 0, True),
        (LengthSemantics.NEW_TOKENS, PreparedPrompt((1,) * 10, 10, False, 64), 63, False),
        (LengthSemantics.NEW_TOKENS, PreparedPrompt((1,) * 10, 10, False, 64), 64, True),
        (LengthSemantics.NEW_TOKENS, PreparedPrompt((1,) * 10, 90, True, 64), 3, False),
    ],
)
def test_hit_length_limit(semantics, prompt, n_output, hit):
    req = request(max_length=64, length_semantics=semantics)
    assert hit_length_limit(req, prompt, n_output) is hit


# -- on the tiny model's tokenizer ---------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    pytest.importorskip("transformers")
    from workers.backends.modelprep import build_tiny_model
    from workers.backends.tokens import harness_tokenizer, resolve_model_source

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny")
    model = ModelSpec("tiny", str(path), "r", "tiny", 0.0003, Tuning.INSTRUCT, "yi")
    return harness_tokenizer(resolve_model_source(model))


def test_the_harness_tokenizer_truncates_left_and_pads_with_eos(tokenizer):
    assert tokenizer.truncation_side == "left" and tokenizer.padding_side == "right"
    assert tokenizer.pad_token == tokenizer.eos_token == "</s>"


def test_tokenize_prompt_keeps_the_bos_and_the_end_of_an_over_long_prompt(tokenizer):
    prompt = "".join(f"x{i} = {i}\n" for i in range(100))
    full = tokenizer(prompt).input_ids
    got = tokenize_prompt(tokenizer, request(prompt, max_length=40), 2048)
    assert got.truncated and got.max_tokens == 0 and got.n_prompt_tokens == len(full)
    assert len(got.ids) == 40 and got.ids[0] == tokenizer.bos_token_id
    assert list(got.ids[1:]) == full[-39:]
    short = tokenize_prompt(tokenizer, request("def f():", max_length=40), 2048)
    assert not short.truncated and short.ids == tuple(tokenizer("def f():").input_ids)
    assert short.max_tokens == 40 - len(short.ids)


def test_decode_continuation_drops_the_bos_and_slices_at_the_prompt(tokenizer):
    prompt = "def add(a, b):"
    ids = tokenizer(prompt).input_ids
    out = tokenizer("\n    return a + b</s>", add_special_tokens=False).input_ids
    text, mismatch = decode_continuation(tokenizer, request(prompt), ids + out, len(ids))
    assert text == "\n    return a + b</s>" and not mismatch  # special tokens kept


def test_decode_continuation_of_a_chat_prompt_slices_at_the_decoded_prompt(tokenizer):
    chat = "<|im_start|>user\nfix f<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer(chat, add_special_tokens=False).input_ids
    out = tokenizer("def f(): pass", add_special_tokens=False).input_ids
    req = request(chat, add_special_tokens=False)
    text, mismatch = decode_continuation(tokenizer, req, ids + out, len(ids))
    assert text == "def f(): pass" and not mismatch


def test_harness_cut_is_the_first_prefix_the_criterion_calls_done(tokenizer):
    out = tokenizer("\n    x = 1\n    y = 2\nz = 3\n", add_special_tokens=False).input_ids
    brute = next(
        k
        for k in range(1, len(out) + 1)
        if continuation_is_done(tokenizer.decode(out[:k]), STOP, StopRule.HARNESS_PYTHON)
    )
    assert brute < len(out)
    assert harness_cut(tokenizer, out, STOP, StopRule.HARNESS_PYTHON) == brute
    assert harness_cut(tokenizer, out, STOP, StopRule.STOP_WORDS) == len(out)


def test_build_generation_records_the_flags_and_the_sample_index(tokenizer):
    prompt = "def f(x):"
    prep = tokenize_prompt(tokenizer, request(prompt, max_length=12), 2048)
    out = tokenizer("\n    return x", add_special_tokens=False).input_ids
    g = build_generation(tokenizer, request(prompt, max_length=12, sample_offset=3), prep, 1, out)
    assert (g.sample_index, g.n_output_tokens, g.output_token_ids) == (4, len(out), tuple(out))
    assert g.continuation == "\n    return x" and not g.decode_mismatch
    assert g.n_prompt_tokens == len(prep.ids) and not g.prompt_truncated
    assert g.hit_length_limit is (len(prep.ids) + len(out) >= 12)


def test_model_source_is_a_local_folder_or_a_hub_id_at_its_revision(tmp_path):
    from workers.backends.tokens import resolve_model_source

    hub = ModelSpec("m", "org/model-that-is-not-a-folder", "abc123", "f", 1.0, Tuning.BASE, "x")
    source = resolve_model_source(hub)
    assert (source.name, source.revision) == ("org/model-that-is-not-a-folder", "abc123")
    assert source.hub_kwargs == {"revision": "abc123", "trust_remote_code": False}
    (tmp_path / "config.json").write_text("{}")
    local = resolve_model_source(dataclasses.replace(hub, repo_id=str(tmp_path)))
    assert (local.name, local.revision) == (str(tmp_path), None)
