"""The BigCode harness's generation semantics, as free functions over a Hugging Face tokenizer.

Both engine backends (hf.py, vllm.py) call these, so tokenization, the length limit, the
stopping rule, decoding and the flags of a generation are written once:
- prompts are tokenized with left truncation to the length limit (`tokenize_prompt`); under
  total-length semantics a prompt at or over the limit is not generated from and is flagged;
- a continuation is done when it holds a stop word or a non-indented non-empty line
  (`continuation_is_done`); the tokenizer's eos is a stop word (`stop_words`);
- the continuation is the full sequence decoded (a leading BOS dropped, special tokens kept)
  and sliced at `len(prompt)` characters (`decode_continuation`).

No torch, transformers or vLLM import here: vllm.py imports this module before it sets the
environment those libraries read at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workers.spec import Generation, GenRequest, LengthSemantics, StopRule

# transformers' default when a config does not say (also what the harness's models fall back to)
DEFAULT_CONTEXT_LENGTH = 2048


def continuation_is_done(
    text: str, stop: Sequence[str], rule: StopRule = StopRule.HARNESS_PYTHON
) -> bool:
    """The harness's `check_fn` for Python: a stop word, or a non-indented non-empty line (the
    first line counts too). Under StopRule.STOP_WORDS only the stop words end a continuation."""
    if any(word in text for word in stop):
        return True
    if rule is StopRule.STOP_WORDS:
        return False
    return any(line.strip() and line[0] not in " \t" for line in text.split("\n"))


def stop_words(request: GenRequest, eos_token: str | None) -> tuple[str, ...]:
    """The request's stop words plus the tokenizer's eos (the harness appends it)."""
    extra = (eos_token,) if eos_token and eos_token not in request.stop else ()
    return tuple(request.stop) + extra


def first_done_index(n: int, is_done: Callable[[int], bool]) -> int:
    """The smallest k in 1..n with is_done(k) (the harness stops after that many output tokens),
    or n when no prefix is done. Binary search (the decoded prefixes only grow), then a linear
    step back in case a prefix's decoding was not monotone (an incomplete UTF-8 byte)."""
    if n == 0 or not is_done(n):
        return n
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        if is_done(mid):
            hi = mid
        else:
            lo = mid + 1
    while lo > 1 and is_done(lo - 1):
        lo -= 1
    return lo


def harness_cut(
    tokenizer: Any, output_ids: Sequence[int], stop: Sequence[str], rule: StopRule
) -> int:
    """How many of `output_ids` the harness would have generated: its stopping criterion
    decodes the output ids (`batch_decode` defaults) after every step and stops the call at the
    first done prefix."""

    def done(k: int) -> bool:
        return continuation_is_done(tokenizer.decode(list(output_ids[:k])), stop, rule)

    return first_done_index(len(output_ids), done)


@dataclass(frozen=True)
class PreparedPrompt:
    """A request's prompt as the harness tokenizes it, and how much may be generated from it."""

    ids: tuple[int, ...]  # input ids after (left) truncation
    n_prompt_tokens: int  # before truncation
    truncated: bool  # cut to the limit, or (total length) exactly at it
    max_tokens: int  # output tokens allowed; 0: not generated (prompt at or over a total limit)


def prepare_prompt(
    full: Sequence[int],
    truncate: Callable[[int], Sequence[int]],
    request: GenRequest,
    model_max_len: int,
) -> PreparedPrompt:
    """The length-limit decision for one request (pure). `full` is the prompt's untruncated
    ids, `truncate(limit)` the tokenizer's left truncation to `limit` tokens. Total length: the
    limit is `max_length`, and a prompt that reaches it is not generated from (the harness
    catches generate's "input length == max_length" error and returns the input). New tokens:
    the prompt keeps at most `model_max_len - max_length` tokens (at least 1)."""
    total = request.length_semantics is LengthSemantics.TOTAL
    limit = request.max_length if total else max(1, model_max_len - request.max_length)
    if len(full) <= limit:
        ids, truncated = tuple(full), total and len(full) >= request.max_length
    else:
        ids, truncated = tuple(truncate(limit)), True
    if total:
        max_tokens = 0 if truncated else request.max_length - len(ids)
    else:
        max_tokens = request.max_length
    return PreparedPrompt(ids, len(full), truncated, max_tokens)


def tokenize_prompt(tokenizer: Any, request: GenRequest, model_max_len: int) -> PreparedPrompt:
    """`prepare_prompt` with the tokenizer (set up with `truncation_side="left"`)."""
    special = request.add_special_tokens
    full = tokenizer(request.prompt, add_special_tokens=special).input_ids

    def truncate(limit: int) -> Sequence[int]:
        # Through the tokenizer, so special tokens sit where the harness's
        # `tokenizer(..., truncation=True, max_length=...)` puts them.
        return tokenizer(
            request.prompt, add_special_tokens=special, truncation=True, max_length=limit
        ).input_ids

    return prepare_prompt(list(full), truncate, request, model_max_len)


def context_length(config: Any) -> int:
    """The model's context length from its HF config (`max_position_embeddings`)."""
    return int(getattr(config, "max_position_embeddings", DEFAULT_CONTEXT_LENGTH))


def decode_continuation(
    tokenizer: Any, request: GenRequest, sequence: Sequence[int], n_in: int
) -> tuple[str, bool]:
    """(continuation, decode_mismatch). Harness templates: the full sequence is decoded (a
    leading BOS id dropped, special tokens kept) and sliced at len(prompt) characters, exactly
    as the harness does, even when that misaligns; the flag says it did. Chat prompts (not a
    harness path) are sliced at the decoded prompt's own length. `n_in`: input ids in
    `sequence`."""
    sequence = list(sequence)
    ids = sequence[1:] if sequence and sequence[0] == tokenizer.bos_token_id else sequence
    decoded = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    if request.add_special_tokens:
        return decoded[len(request.prompt) :], not decoded.startswith(request.prompt)
    prompt_ids = ids[: n_in - (len(sequence) - len(ids))]
    head = tokenizer.decode(
        prompt_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
    )
    return decoded[len(head) :], not decoded.startswith(head)


def hit_length_limit(request: GenRequest, prompt: PreparedPrompt, n_output: int) -> bool:
    """Did the sample end at the length limit? Total length: prompt + output reached
    `max_length` (a truncated prompt always did); new tokens: the output reached it."""
    if request.length_semantics is LengthSemantics.TOTAL:
        return prompt.truncated or len(prompt.ids) + n_output >= request.max_length
    return n_output >= request.max_length


def build_generation(
    tokenizer: Any,
    request: GenRequest,
    prompt: PreparedPrompt,
    sample: int,
    output_ids: Sequence[int],
) -> Generation:
    """The record of one sample: `output_ids` are the tokens generated after `prompt.ids`,
    already cut where the harness stops; `sample` counts from the request's first sample."""
    sequence = list(prompt.ids) + list(output_ids)
    continuation, mismatch = decode_continuation(tokenizer, request, sequence, len(prompt.ids))
    return Generation(
        task_id=request.task_id,
        sample_index=request.sample_offset + sample,
        continuation=continuation,
        n_prompt_tokens=prompt.n_prompt_tokens,
        n_output_tokens=len(output_ids),
        prompt_truncated=prompt.truncated,
        hit_length_limit=hit_length_limit(request, prompt, len(output_ids)),
        output_token_ids=tuple(output_ids),
        decode_mismatch=mismatch,
    )
