"""The Hugging Face transformers backend, with the BigCode harness's generation semantics.

It is what the harness does:
- one prompt per `generate` call, `num_return_sequences` = samples per call, never padded;
- prompts tokenized with left truncation to the length limit; `max_length` = prompt + output
  tokens; a prompt at or over the limit is not generated from (the harness catches that error and
  uses the truncated input as the output) and is flagged;
- the harness's stopping criterion (any stop word, or any non-indented non-empty line, in the
  decoded continuation of *every* sequence of the call);
- decoding of the full sequence (BOS dropped, special tokens kept) and a character slice at
  `len(prompt)`;
- seeding once per run (`global_seed`), problems in order.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, StoppingCriteria, StoppingCriteriaList

from workers.backends.base import UnsupportedSetting
from workers.backends.modelprep import ensure_model
from workers.spec import (
    BackendName,
    Dtype,
    EngineInfo,
    EngineSpec,
    Generation,
    GenRequest,
    LengthSemantics,
    Quant,
    StopRule,
)

logger = logging.getLogger(__name__)

TORCH_DTYPES = {Dtype.FP32: torch.float32, Dtype.FP16: torch.float16, Dtype.BF16: torch.bfloat16}


def continuation_is_done(
    text: str, stop: Sequence[str], rule: StopRule = StopRule.HARNESS_PYTHON
) -> bool:
    """The harness's `check_fn` for Python: a stop word, or a non-indented non-empty line.
    Under StopRule.STOP_WORDS only the stop words end a continuation."""
    if any(word in text for word in stop):
        return True
    if rule is StopRule.STOP_WORDS:
        return False
    return any(line.strip() and line[0] not in " \t" for line in text.split("\n"))


class EndOfFunctionCriteria(StoppingCriteria):
    """Stops the whole call only when every sequence is done (the harness returns one bool)."""

    def __init__(
        self,
        start_length: int,
        stop: Sequence[str],
        tokenizer,
        rule: StopRule = StopRule.HARNESS_PYTHON,
    ):
        self.start_length = start_length
        self.stop = tuple(stop)
        self.tokenizer = tokenizer
        self.rule = rule

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        decoded = self.tokenizer.batch_decode(input_ids[:, self.start_length :])
        done = all(continuation_is_done(text, self.stop, self.rule) for text in decoded)
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


def _sha256_of(text: str | None) -> str | None:
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text is not None else None


def _pick_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise UnsupportedSetting("hf.device=cuda but no CUDA device is visible")
    return requested


class HfBackend:
    def __init__(self) -> None:
        self.model = None
        self.tokenizer = None
        self.engine: EngineSpec | None = None
        self.device = "cpu"

    # -- loading -----------------------------------------------------------------------------

    def load(self, engine: EngineSpec) -> EngineInfo:
        model_spec = engine.model
        local = Path(model_spec.repo_id)
        is_local = local.exists() or model_spec.builder is not None
        source = str(ensure_model(model_spec.repo_id, model_spec.builder)) if is_local else None
        name = source or model_spec.repo_id
        revision = None if is_local else model_spec.revision
        self.device = _pick_device(engine.hf.device)
        kwargs: dict = {"revision": revision, "trust_remote_code": model_spec.trust_remote_code}
        if engine.quant is Quant.NONE:
            kwargs["dtype"] = TORCH_DTYPES[engine.dtype]
        else:
            from transformers import BitsAndBytesConfig

            # transformers 5 dropped load_in_8bit=/load_in_4bit= on from_pretrained; these are
            # the equivalents of what the harness passes (spec §4.1): 8-bit LLM.int8 with fp16
            # non-quantised parts; 4-bit with fp16 compute, bitsandbytes defaults (fp4, no
            # double quantisation) unless nf4 is asked for.
            if engine.quant is Quant.INT8:
                kwargs["quantization_config"] = BitsAndBytesConfig(load_in_8bit=True)
            else:
                kwargs["quantization_config"] = BitsAndBytesConfig(
                    load_in_4bit=True,
                    bnb_4bit_compute_dtype=torch.float16,
                    bnb_4bit_quant_type=engine.bnb_4bit_quant_type.value,
                )
            kwargs["dtype"] = torch.float16
            kwargs["device_map"] = {"": self.device if self.device == "cpu" else 0}
        self.model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
        if engine.quant is Quant.NONE:
            self.model.to(self.device)
        self.model.eval()
        tokenizer = AutoTokenizer.from_pretrained(
            name,
            revision=revision,
            trust_remote_code=model_spec.trust_remote_code,
            truncation_side="left",
            padding_side="right",
        )
        if tokenizer.eos_token is None:
            if tokenizer.bos_token is None:
                raise UnsupportedSetting(f"tokenizer of {name} has neither eos nor bos token")
            tokenizer.eos_token = tokenizer.bos_token
        tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        self.engine = engine
        backend_tok = getattr(tokenizer, "backend_tokenizer", None)
        vocab_text = backend_tok.to_str() if backend_tok is not None else str(tokenizer.get_vocab())
        resolved = getattr(self.model.config, "_commit_hash", None) or model_spec.revision
        return EngineInfo(
            backend=BackendName.HF,
            backend_version=f"transformers {transformers.__version__}, torch {torch.__version__}",
            device=self._device_name(),
            effective_dtype=str(next(self.model.parameters()).dtype).removeprefix("torch."),
            model_revision=str(resolved),
            tokenizer_sha256=hashlib.sha256(vocab_text.encode("utf-8")).hexdigest(),
            chat_template_sha256=_sha256_of(getattr(tokenizer, "chat_template", None)),
            eos_token=tokenizer.eos_token,
            options={
                "device": self.device,
                "quantization": engine.quant.value,
                "bnb_4bit_quant_type": engine.bnb_4bit_quant_type.value,
            },
        )

    def _device_name(self) -> str:
        if self.device.startswith("cuda"):
            return f"cuda:{torch.cuda.get_device_name(0)}"
        return "cpu"

    @property
    def eos_token(self) -> str | None:
        return self.tokenizer.eos_token if self.tokenizer is not None else None

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise UnsupportedSetting("template 'chat': the tokenizer has no chat template")
        return self.tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=True
        )

    def count_tokens(self, prompt: str, add_special_tokens: bool = True) -> int:
        return len(self.tokenizer(prompt, add_special_tokens=add_special_tokens).input_ids)

    def close(self) -> None:
        self.model = None
        self.tokenizer = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # -- generation --------------------------------------------------------------------------

    def generate(
        self, requests: Sequence[GenRequest], global_seed: int | None = None
    ) -> list[Generation]:
        if self.model is None:
            raise RuntimeError("HfBackend.generate called before load")
        if global_seed is not None:
            transformers.set_seed(global_seed)  # random, numpy, torch (+cuda), like accelerate
        out: list[Generation] = []
        for request in requests:
            out.extend(self._generate_one(request))
        return out

    def _tokenize(self, request: GenRequest) -> tuple[list[int], int, bool]:
        """(input ids, untruncated prompt token count, truncated?) as the harness tokenizes."""
        tok = self.tokenizer
        full = tok(request.prompt, add_special_tokens=request.add_special_tokens).input_ids
        if request.length_semantics is LengthSemantics.TOTAL:
            limit = request.max_length
        else:
            limit = max(1, self._model_max_len() - request.max_length)
        if len(full) <= limit:
            return (
                list(full),
                len(full),
                len(full) >= request.max_length
                and (request.length_semantics is LengthSemantics.TOTAL),
            )
        # Left truncation through the tokenizer, so special tokens are placed as the harness's
        # `tokenizer(..., truncation=True, max_length=...)` places them.
        ids = tok(
            request.prompt,
            add_special_tokens=request.add_special_tokens,
            truncation=True,
            max_length=limit,
        ).input_ids
        return list(ids), len(full), True

    def _model_max_len(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    def _decode_continuation(
        self, request: GenRequest, sequence: list[int], n_in: int
    ) -> tuple[str, bool]:
        """(continuation, decode_mismatch). Harness templates: the full sequence is decoded
        (a leading BOS id dropped, special tokens kept) and sliced at len(prompt) characters,
        exactly as the harness does, even when that misaligns; the flag says it did. Chat
        prompts (not a harness path) are sliced at the decoded prompt's own length."""
        tok = self.tokenizer
        ids = sequence[1:] if sequence and sequence[0] == tok.bos_token_id else sequence
        decoded = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if request.add_special_tokens:
            return decoded[len(request.prompt) :], not decoded.startswith(request.prompt)
        prompt_ids = ids[: n_in - (len(sequence) - len(ids))]
        head = tok.decode(prompt_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        return decoded[len(head) :], not decoded.startswith(head)

    def _generate_one(self, request: GenRequest) -> list[Generation]:
        ids, n_prompt, truncated = self._tokenize(request)
        n_in = len(ids)
        per_call = max(1, request.samples_per_call)
        n_calls = math.ceil(request.n_samples / per_call)
        sequences: list[list[int]] = []
        for call in range(n_calls):
            if request.sampling.seed is not None:
                torch.manual_seed(request.sampling.seed + call)
            sequences.extend(self._call(request, ids, per_call, truncated))
        sequences = sequences[: request.n_samples]  # the harness drops the extra copies
        results = []
        for i, seq in enumerate(sequences):
            continuation, mismatch = self._decode_continuation(request, seq, n_in)
            n_out = len(seq) - n_in
            if request.length_semantics is LengthSemantics.TOTAL:
                hit = truncated or len(seq) >= request.max_length
            else:
                hit = n_out >= request.max_length
            results.append(
                Generation(
                    task_id=request.task_id,
                    sample_index=request.sample_offset + i,
                    continuation=continuation,
                    n_prompt_tokens=n_prompt,
                    n_output_tokens=n_out,
                    prompt_truncated=truncated,
                    hit_length_limit=hit,
                    output_token_ids=tuple(seq[n_in:]),
                    decode_mismatch=mismatch,
                )
            )
        return results

    def _call(self, request: GenRequest, ids: list[int], per_call: int, truncated: bool):
        if truncated and request.length_semantics is LengthSemantics.TOTAL:
            # What the harness does when generate refuses "input length == max_length": the
            # (truncated) input is the output, for every copy.
            return [list(ids) for _ in range(per_call)]
        sampling = request.sampling
        input_ids = torch.tensor([ids], device=self.model.device)
        kwargs: dict = {
            "do_sample": sampling.do_sample,
            "num_return_sequences": per_call,
            "stopping_criteria": StoppingCriteriaList(
                [
                    EndOfFunctionCriteria(
                        len(ids), self._stop_words(request), self.tokenizer, request.stop_rule
                    )
                ]
            ),
        }
        if request.length_semantics is LengthSemantics.TOTAL:
            kwargs["max_length"] = request.max_length
        else:
            kwargs["max_new_tokens"] = request.max_length
        if sampling.do_sample:
            kwargs.update(
                temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k
            )
        started = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(input_ids, **kwargs)
        logger.debug("generate %s: %.2fs", request.task_id, time.perf_counter() - started)
        return [row.tolist() for row in output]

    def _stop_words(self, request: GenRequest) -> tuple[str, ...]:
        eos = self.tokenizer.eos_token
        return tuple(request.stop) + ((eos,) if eos and eos not in request.stop else ())
