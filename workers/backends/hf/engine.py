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
- seeding once per run (`global_seed`) as the harness leaves the random streams before its
  first batch (`seed_like_harness`), problems in order.
The tokenization, length, stopping and decoding rules are harness.py's (shared with vllm.py);
this module runs them with transformers' `generate`.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, StoppingCriteria, StoppingCriteriaList

from workers.backends import harness
from workers.backends.base import UnsupportedSetting, options_of
from workers.backends.harness import PreparedPrompt, continuation_is_done
from workers.backends.hf import HF, HfOptions
from workers.backends.hf.batched import generate_batched
from workers.backends.tokens import (
    ModelSource,
    chat_template_sha256,
    harness_tokenizer,
    render_chat,
    resolve_model_source,
    resolved_revision,
    tokenizer_sha256,
)
from workers.spec import (
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

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.Tensor:
        decoded = self.tokenizer.batch_decode(input_ids[:, self.start_length :])
        done = all(continuation_is_done(text, self.stop, self.rule) for text in decoded)
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


def _pick_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise UnsupportedSetting("hf.device=cuda but no CUDA device is visible")
    return requested


def precision_kwargs(engine: EngineSpec, device: str) -> dict:
    """`from_pretrained` arguments for the engine's dtype and quantization."""
    if engine.quant is Quant.NONE:
        return {"dtype": TORCH_DTYPES[engine.dtype]}
    from transformers import BitsAndBytesConfig

    # transformers 5 dropped load_in_8bit=/load_in_4bit= on from_pretrained; these are the
    # equivalents of what the harness passes (spec §4.1): 8-bit LLM.int8 with fp16
    # non-quantised parts; 4-bit with fp16 compute, bitsandbytes defaults (fp4, no double
    # quantisation) unless nf4 is asked for.
    if engine.quant is Quant.INT8:
        config = BitsAndBytesConfig(load_in_8bit=True)
    else:
        config = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_compute_dtype=torch.float16,
            bnb_4bit_quant_type=engine.bnb_4bit_quant_type.value,
        )
    return {
        "quantization_config": config,
        "dtype": torch.float16,
        "device_map": {"": device if device == "cpu" else 0},
    }


def load_model(engine: EngineSpec, source: ModelSource, device: str):
    """The model on `device` in eval mode (bitsandbytes places quantized models itself)."""
    model: Any = AutoModelForCausalLM.from_pretrained(
        source.name, **source.hub_kwargs, **precision_kwargs(engine, device)
    )
    if engine.quant is Quant.NONE:
        model.to(device)
    model.eval()
    return model


def capture_streams() -> bytes:
    """Every global random stream set_seed seeds (Python, NumPy, torch CPU and each CUDA
    device), as JSON bytes (no pickle: the bytes come back from a store)."""
    legacy = np.random.get_state(legacy=True)
    # NumPy's global RandomState is always MT19937, whose legacy state is the tuple form (the
    # dict form is for other bit generators, which the stubs cannot tell apart).
    assert isinstance(legacy, tuple)
    mt, keys, pos, has_gauss, cached = legacy
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode(),
        "numpy": [mt, keys.tolist(), pos, has_gauss, cached],
        "random": [version, list(internal), gauss_next],
        "cuda": [
            base64.b64encode(s.numpy().tobytes()).decode()
            for s in (torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [])
        ],
    }
    return json.dumps(state).encode()


def restore_streams(data: bytes) -> None:
    """The inverse of capture_streams (on the same kind of device: CUDA states need CUDA)."""
    state = json.loads(data)

    def tensor(text: str) -> torch.Tensor:
        return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)

    torch.set_rng_state(tensor(state["torch"]))
    mt, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((mt, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss_next = state["random"]
    random.setstate((version, tuple(internal), gauss_next))
    if state["cuda"]:
        if not torch.cuda.is_available():
            raise UnsupportedSetting("the stored random stream is CUDA's; no CUDA device here")
        torch.cuda.set_rng_state_all([tensor(s) for s in state["cuda"]])


def seed_like_harness(seed: int) -> None:
    """Leave the global random streams as the harness has them at its first generate call.

    The harness calls `accelerate.utils.set_seed(seed, device_specific=True)` (seed + process
    index, 0 for its single process: Python, NumPy, torch CPU and every CUDA device), then
    iterates its DataLoader (an IterableDataset prepared by accelerate, which dispatches
    batches with one process and synchronises no RNG). Starting that iteration creates torch's
    `_BaseDataLoaderIter`, which draws one int64 from the global CPU generator (`_base_seed`,
    for worker processes it never starts). Nothing else draws before or between its generate
    calls. On CUDA, sampling draws from the CUDA generator, which that draw does not touch;
    it is made on every device because it is what the harness does.
    """
    transformers.set_seed(seed)
    torch.empty((), dtype=torch.int64).random_()


class HfBackend:
    def __init__(self) -> None:
        self.model: Any = None  # a transformers PreTrainedModel once loaded
        self.tokenizer: Any = None
        self.engine: EngineSpec | None = None
        self.device = "cpu"
        # Prompts decoding together (generation.batch_size); the session hands a backend of
        # more than one a chunk's requests in one call.
        self.prompts_per_call = 1

    # -- loading -----------------------------------------------------------------------------

    def load(self, engine: EngineSpec) -> EngineInfo:
        source = resolve_model_source(engine.model)
        self.device = _pick_device(options_of(engine, HfOptions).device)
        self.model = load_model(engine, source, self.device)
        self.tokenizer = harness_tokenizer(source)
        self.engine = engine
        self.prompts_per_call = options_of(engine, HfOptions).prompts_per_call
        return EngineInfo(
            backend=HF.name,
            backend_versions={"transformers": transformers.__version__, "torch": torch.__version__},
            device=self._device_name(),
            effective_dtype=str(next(self.model.parameters()).dtype).removeprefix("torch."),
            model_revision=resolved_revision(self.model.config, engine.model),
            tokenizer_sha256=tokenizer_sha256(self.tokenizer),
            chat_template_sha256=chat_template_sha256(self.tokenizer),
            eos_token=self.tokenizer.eos_token,
            options={
                "device": self.device,
                "quantization": engine.quant.value,
                "bnb_4bit_quant_type": engine.bnb_4bit_quant_type.value,
                "batch_size": str(self.prompts_per_call),
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
        return render_chat(self.tokenizer, messages)

    def close(self) -> None:
        self.model = None
        self.tokenizer = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # -- generation --------------------------------------------------------------------------

    def stream_state(self) -> bytes | None:
        return capture_streams()

    def restore_stream(self, state: bytes) -> None:
        restore_streams(state)

    def generate(
        self, requests: Sequence[GenRequest], global_seed: int | None = None
    ) -> list[Generation]:
        if self.model is None:
            raise RuntimeError("HfBackend.generate called before load")
        if global_seed is not None:
            seed_like_harness(global_seed)
        if self.prompts_per_call > 1:
            return generate_batched(self.model, self.tokenizer, requests, self.prompts_per_call)
        out: list[Generation] = []
        for request in requests:
            out.extend(self._generate_one(request))
        return out

    def _generate_one(self, request: GenRequest) -> list[Generation]:
        prompt = harness.tokenize_prompt(
            self.tokenizer, request, harness.context_length(self.model.config)
        )
        per_call = max(1, request.samples_per_call)
        n_calls = math.ceil(request.n_samples / per_call)
        sequences: list[list[int]] = []
        for call in range(n_calls):
            if request.sampling.seed is not None:
                torch.manual_seed(request.sampling.seed + call)
            sequences.extend(self._call(request, prompt, per_call))
        sequences = sequences[: request.n_samples]  # the harness drops the extra copies
        n_in = len(prompt.ids)
        return [
            harness.build_generation(self.tokenizer, request, prompt, i, seq[n_in:])
            for i, seq in enumerate(sequences)
        ]

    def _call(self, request: GenRequest, prompt: PreparedPrompt, per_call: int):
        if prompt.max_tokens == 0:
            # What the harness does when generate refuses "input length == max_length": the
            # (truncated) input is the output, for every copy.
            return [list(prompt.ids) for _ in range(per_call)]
        sampling = request.sampling
        stop = harness.stop_words(request, self.tokenizer.eos_token)
        criterion = EndOfFunctionCriteria(len(prompt.ids), stop, self.tokenizer, request.stop_rule)
        kwargs: dict = {
            "do_sample": sampling.do_sample,
            "num_return_sequences": per_call,
            "stopping_criteria": StoppingCriteriaList([criterion]),
        }
        if request.length_semantics is LengthSemantics.TOTAL:
            kwargs["max_length"] = request.max_length
        else:
            kwargs["max_new_tokens"] = request.max_length
        if sampling.do_sample:
            kwargs.update(
                temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k
            )
        input_ids = torch.tensor([list(prompt.ids)], device=self.model.device)
        started = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(input_ids, **kwargs)
        logger.debug("generate %s: %.2fs", request.task_id, time.perf_counter() - started)
        return [row.tolist() for row in output]
