"""Batched transformers generation (`generation.batch_size` = B > 1): up to B of the harness's
calls decode together, and a call that finishes hands its place to the next one at once, so
a long output does not hold the others' places (what one `generate` call over a padded batch
would do). For the fast path's settings that vLLM cannot run (bitsandbytes 8-bit, and 4-bit
where the installed vLLM has no bitsandbytes).

What stays the harness's (workers/backends/harness.py), per sequence:
- the prompt is tokenized, left-truncated and length-limited as for one prompt per call (a
  prompt at or over a total limit is not generated from), and prefilled alone, as batch 1
  prefills it;
- the sequence stops where the harness's criterion first holds on its decoded continuation
  (`continuation_is_done`), at one of the model's eos ids, or at its own length limit (total:
  prompt + output; new_tokens: output); its output ids are cut there and decoded as hf does;
- greedy takes the arg-max; a sampled call draws from a generator of its own seeded as batch
  1 seeds the global one for that call (`seed + call`), after HF's warpers in HF's order: the
  random stream batch 1 draws from, whatever the call is batched with.
What batching adds: the calls' key/value caches are left-padded to one width under an
attention mask (positions count each sequence's own tokens), and decode steps run over all of
them. Padded shapes change what the kernels reduce over (logits differ from batch 1's in the
last bits, also in fp32), so an output can differ from batch 1 where that rounding decides
between two tokens: rarely for greedy (in fp32 on the tiny model never,
tests/unit/workers/backends/test_hf_batched.py), more often for a sample, whose draw moves
across a token boundary; `compare-backends` measures both.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import (
    DynamicCache,
    LogitsProcessorList,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)
from transformers.cache_utils import DynamicLayer

from workers.backends import harness
from workers.backends.base import UnsupportedSetting
from workers.backends.harness import PreparedPrompt, continuation_is_done
from workers.spec import Generation, GenRequest, SamplingSpec

# generation_config.json fields that make HF's generate add a processor reproduced here only at
# their neutral value (repetition_penalty and min_p are reproduced at any value).
NEUTRAL_FIELDS: dict[str, Any] = {
    "no_repeat_ngram_size": None,
    "encoder_no_repeat_ngram_size": None,
    "encoder_repetition_penalty": 1.0,
    "bad_words_ids": None,
    "sequence_bias": None,
    "min_length": 0,
    "min_new_tokens": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "exponential_decay_length_penalty": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "top_h": None,
    "guidance_scale": None,
    "renormalize_logits": False,
}


@dataclass(frozen=True)
class Call:
    """One of the harness's `generate` calls: a prompt and the sequences it returns."""

    request: int  # index of its request
    prompt: PreparedPrompt
    copies: int  # sequences it returns (the harness's num_return_sequences)
    seed: int | None  # the call's seed (the request's + the call's index); None: greedy


def plan_calls(request: GenRequest, index: int, prompt: PreparedPrompt) -> list[Call]:
    """The calls batch 1 makes for `request`. Greedy copies are identical: one sequence is
    generated and repeated. Sampled: ceil(n / per_call) calls of per_call sequences, call c
    seeded with seed + c, as HfBackend seeds the global stream per call."""
    if not request.sampling.do_sample:
        return [Call(index, prompt, 1, None)]
    if request.sampling.seed is None:
        raise UnsupportedSetting(
            "batched transformers generation (generation.batch_size > 1) seeds each call; a "
            "sampled request without a seed draws from the harness's one global stream"
        )
    per_call = max(1, request.samples_per_call)
    n_calls = math.ceil(request.n_samples / per_call)
    return [Call(index, prompt, per_call, request.sampling.seed + c) for c in range(n_calls)]


def check_generation_config(config: Any) -> float:
    """The repetition penalty HF's generate takes from the model's generation config (1.0:
    none); UnsupportedSetting for a field whose processor is not reproduced here."""
    for name, neutral in NEUTRAL_FIELDS.items():
        value = getattr(config, name, neutral)
        if value not in (neutral, None) and not (neutral is None and value in ([], {})):
            raise UnsupportedSetting(
                f"the model's generation config sets {name}={value!r}, which batched "
                "transformers generation does not reproduce (use generation.batch_size=1)"
            )
    penalty = getattr(config, "repetition_penalty", None)
    return 1.0 if penalty is None else float(penalty)


def sampling_warpers(sampling: SamplingSpec, config: Any) -> LogitsProcessorList:
    """HF's sampling warpers for the request's parameters and the model's min_p, in the order
    HF's generate applies them."""
    warpers = LogitsProcessorList()
    if sampling.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k != 0:
        warpers.append(TopKLogitsWarper(top_k=sampling.top_k, min_tokens_to_keep=1))
    if sampling.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=sampling.top_p, min_tokens_to_keep=1))
    min_p = getattr(config, "min_p", None)
    if min_p is not None:
        warpers.append(MinPLogitsWarper(min_p=min_p, min_tokens_to_keep=1))
    return warpers


def eos_ids(model: Any) -> frozenset[int]:
    """The eos ids `generate` stops a sequence at (the model's generation config)."""
    value = getattr(model.generation_config, "eos_token_id", None)
    if value is None:
        return frozenset()
    return frozenset([value] if isinstance(value, int) else value)


@dataclass
class Running:
    """A call while it decodes: its sequences' tokens, where each stopped, its generator."""

    call: Call
    request: GenRequest
    stop: tuple[str, ...]
    generator: torch.Generator | None
    warpers: LogitsProcessorList
    tokens: list[list[int]] = field(default_factory=list)
    done_at: list[int | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tokens = [[] for _ in range(self.call.copies)]
        self.done_at = [None] * self.call.copies

    @property
    def finished(self) -> bool:
        """Every sequence stopped: batch 1 ends the call (its criterion needs all of them)."""
        return all(d is not None for d in self.done_at)

    def outputs(self) -> list[list[int]]:
        return [t[:d] for t, d in zip(self.tokens, self.done_at, strict=True)]


class Decoder:
    """The calls decoding together: their key/value cache (one row per sequence, left-padded
    to one width), its attention mask and the last step's logits."""

    def __init__(self, model: Any, tokenizer: Any, penalty: float):
        self.model, self.tokenizer = model, tokenizer
        self.eos = eos_ids(model)
        self.penalty = RepetitionPenaltyLogitsProcessor(penalty) if penalty != 1.0 else None
        self.running: list[Running] = []
        self.cache: Any = None
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=model.device)
        self.logits = torch.zeros((0, 0), device=model.device)

    def admit(self, running: Running) -> None:
        """Prefill the call's prompt (one row per sequence, as batch 1 prefills it) and put
        its cache, mask and logits beside the others'."""
        prompt = running.call.prompt.ids
        ids = torch.tensor([list(prompt)] * running.call.copies, device=self.model.device)
        cache: Any = DynamicCache(config=self.model.config)
        with torch.inference_mode():
            out = self.model(input_ids=ids, past_key_values=cache, use_cache=True)
        if not all(type(layer) is DynamicLayer for layer in cache.layers):
            raise UnsupportedSetting(
                "batched transformers generation needs a model with a plain key/value cache "
                "(no sliding-window or static layers); use generation.batch_size=1"
            )
        mask = torch.ones(ids.shape, dtype=torch.long, device=self.model.device)
        logits = out.logits[:, -1, :].to(dtype=torch.float32)
        if self.cache is None:
            self.cache, self.mask, self.logits = cache, mask, logits
        else:
            width = max(self.mask.shape[1], mask.shape[1])
            for mine, theirs in zip(self.cache.layers, cache.layers, strict=True):
                mine.keys = torch.cat([_pad(mine.keys, width), _pad(theirs.keys, width)])
                mine.values = torch.cat([_pad(mine.values, width), _pad(theirs.values, width)])
            self.mask = torch.cat([_pad_mask(self.mask, width), _pad_mask(mask, width)])
            self.logits = torch.cat([self.logits, logits])
        self.running.append(running)

    def choose(self) -> list[int]:
        """Each sequence's next token from the last logits: HF's processors, then arg-max
        (greedy) or the call's generator over its sequences (sampled)."""
        chosen: list[int] = []
        row = 0
        for run in self.running:
            rows = slice(row, row + run.call.copies)
            scores: Any = self.logits[rows]
            if self.penalty is not None:
                scores = self._penalized(run, scores)
            if run.generator is None:
                chosen += scores.argmax(dim=-1).tolist()
            else:
                history: Any = torch.zeros((scores.shape[0], 0), dtype=torch.long)
                probs = torch.softmax(run.warpers(history, scores), dim=-1)
                chosen += torch.multinomial(probs, 1, generator=run.generator)[:, 0].tolist()
            row += run.call.copies
        return chosen

    def _penalized(self, run: Running, scores: torch.Tensor) -> torch.Tensor:
        """The repetition penalty over each sequence's own prompt and output (no padding)."""
        assert self.penalty is not None
        out = []
        for copy, tokens in enumerate(run.tokens):
            ids = torch.tensor([[*run.call.prompt.ids, *tokens]], device=scores.device)
            out.append(self.penalty(ids, scores[copy : copy + 1]))
        return torch.cat(out)

    def record(self, chosen: Sequence[int]) -> None:
        """Append each sequence's token and mark the sequences the harness would stop."""
        row = 0
        for run in self.running:
            limit = run.call.prompt.max_tokens
            for copy in range(run.call.copies):
                token = chosen[row]
                row += 1
                if run.done_at[copy] is not None:
                    continue
                run.tokens[copy].append(token)
                n = len(run.tokens[copy])
                text = self.tokenizer.decode(run.tokens[copy])
                if (
                    token in self.eos
                    or n >= limit
                    or continuation_is_done(text, run.stop, run.request.stop_rule)
                ):
                    run.done_at[copy] = n

    def retire(self) -> list[Running]:
        """Drop the finished calls' rows (and the padding no row needs any more)."""
        keep: list[Running] = []
        rows: list[int] = []
        row = 0
        finished = []
        for run in self.running:
            if run.finished:
                finished.append(run)
            else:
                keep.append(run)
                rows += range(row, row + run.call.copies)
            row += run.call.copies
        if not finished:
            return []
        self.running = keep
        if not keep:
            self.cache, self.mask = None, self.mask[:0, :0]
            self.logits = self.logits[:0]
            return finished
        index = torch.tensor(rows, device=self.mask.device)
        self.mask = self.mask[index]
        self.logits = self.logits[index]
        unused = int((self.mask.cumsum(dim=1) == 0).sum(dim=1).min())
        self.mask = self.mask[:, unused:]
        for layer in self.cache.layers:
            layer.keys = layer.keys[index, :, unused:]
            layer.values = layer.values[index, :, unused:]
        return finished

    def step(self, chosen: Sequence[int]) -> None:
        """One decode step: every running sequence's last token through the model."""
        ids = torch.tensor([[t] for t in chosen], device=self.mask.device)
        positions = self.mask.sum(dim=1, keepdim=True)
        ones = torch.ones((self.mask.shape[0], 1), dtype=self.mask.dtype, device=self.mask.device)
        self.mask = torch.cat([self.mask, ones], dim=1)
        with torch.inference_mode():
            out = self.model(
                input_ids=ids,
                attention_mask=self.mask,
                position_ids=positions,
                past_key_values=self.cache,
                use_cache=True,
            )
        self.logits = out.logits[:, -1, :].to(dtype=torch.float32)


def _pad(states: torch.Tensor, width: int) -> torch.Tensor:
    """Key/value states (rows, heads, length, dim) left-padded with zeros to `width`."""
    missing = width - states.shape[-2]
    return torch.nn.functional.pad(states, (0, 0, missing, 0)) if missing else states


def _pad_mask(mask: torch.Tensor, width: int) -> torch.Tensor:
    missing = width - mask.shape[1]
    return torch.nn.functional.pad(mask, (missing, 0)) if missing else mask


def decode_calls(
    model: Any,
    tokenizer: Any,
    calls: Sequence[Call],
    requests: Sequence[GenRequest],
    batch_size: int,
) -> dict[Call, list[list[int]]]:
    """Every call's output ids per sequence, at most `batch_size` calls decoding at once."""
    penalty = check_generation_config(model.generation_config)
    decoder = Decoder(model, tokenizer, penalty)
    waiting = deque(c for c in calls if c.prompt.max_tokens > 0)
    out: dict[Call, list[list[int]]] = {}
    while waiting or decoder.running:
        while waiting and len(decoder.running) < batch_size:
            call = waiting.popleft()
            request = requests[call.request]
            generator = None
            if call.seed is not None:
                generator = torch.Generator(device=model.device).manual_seed(call.seed)
            stop = harness.stop_words(request, tokenizer.eos_token)
            warpers = sampling_warpers(request.sampling, model.generation_config)
            decoder.admit(Running(call, request, stop, generator, warpers))
        chosen = decoder.choose()
        decoder.record(chosen)
        kept = [t for run, t in _rows(decoder.running, chosen) if not run.finished]
        for run in decoder.retire():
            out[run.call] = run.outputs()
        if decoder.running:
            decoder.step(kept)
    return out


def _rows(running: Sequence[Running], chosen: Sequence[int]) -> list[tuple[Running, int]]:
    """Each row's call beside its chosen token."""
    owners = [run for run in running for _ in range(run.call.copies)]
    return list(zip(owners, chosen, strict=True))


def generate_batched(
    model: Any, tokenizer: Any, requests: Sequence[GenRequest], batch_size: int
) -> list[Generation]:
    """Every request's generations in request order (n_samples each), at most `batch_size`
    of the harness's calls decoding at once."""
    context = harness.context_length(model.config)
    prompts = [harness.tokenize_prompt(tokenizer, r, context) for r in requests]
    calls = [c for i, r in enumerate(requests) for c in plan_calls(r, i, prompts[i])]
    outputs = decode_calls(model, tokenizer, calls, requests, batch_size)
    generations: list[Generation] = []
    for i, request in enumerate(requests):
        sequences = [seq for c in calls if c.request == i for seq in outputs.get(c, [])]
        if not sequences:  # not generated from: the (truncated) input is the output
            sequences = [[]]
        if not request.sampling.do_sample or len(sequences) < request.n_samples:
            sequences = (sequences * request.n_samples)[: request.n_samples]
        for k, seq in enumerate(sequences[: request.n_samples]):
            generations.append(harness.build_generation(tokenizer, request, prompts[i], k, seq))
    return generations
