"""The vLLM backend: the fast path for full sweeps, with the BigCode harness's semantics where
vLLM can express them, and a documented, measured difference where it cannot (docs/vllm.md).

Same as hf.py (the reference): prompts tokenized by the HF tokenizer as hf.py does and passed
as token ids; the limit counts prompt + output tokens, a prompt at or over it is not generated
from and is flagged; the harness's stopping rule (a stop word or a non-indented line) ends the
output: vLLM stops on the stop words, the engine is stepped and a sequence aborted once its
text is done, and the output ids are cut where the harness's criterion (decoding the output
ids) first holds; the continuation is the full sequence decoded (BOS dropped) sliced at
len(prompt). Different: the unit's requests share batches (continuous batching), and sampling
uses a per-request seed (seed_policy=per_sample), not the harness's global stream.

vLLM, torch and transformers are imported in `load()`, after the environment is set.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.backends.base import UnsupportedSetting
from workers.backends.modelprep import ensure_model
from workers.backends.vllm_setup import (
    check_batch_invariance,
    check_quantization,
    declares_stale_gguf,
    import_configured,
    sha256_of,
    tokenizer_sha256,
    vllm_distribution,
)
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

VLLM_DTYPES = {Dtype.FP32: "float32", Dtype.FP16: "float16", Dtype.BF16: "bfloat16"}
# generation_config.json fields that change HF's output and that this backend does not map
# onto vLLM; a model that sets one of them is refused rather than silently generated differently.
UNMAPPED_GENERATION_FIELDS = (
    "no_repeat_ngram_size", "encoder_repetition_penalty", "bad_words_ids", "suppress_tokens",
    "begin_suppress_tokens", "forced_bos_token_id", "forced_eos_token_id", "min_length",
    "min_new_tokens", "typical_p", "epsilon_cutoff", "eta_cutoff", "sequence_bias",
    "exponential_decay_length_penalty",
)  # fmt: skip
NEUTRAL_GENERATION_VALUES = {"typical_p": 1.0, "encoder_repetition_penalty": 1.0}


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


class _StopState:
    """The harness's rule applied to vLLM's streamed text as it grows. Only the text from the
    start of the line that was still growing is checked again (earlier lines were not done):
    a check of a part of the text can miss a stop word that straddles that line start (then
    vLLM generates on and the exact cut removes the extra tokens), never stop too early."""

    def __init__(self, stop: Sequence[str], is_done: Callable[[str, Sequence[str]], bool]):
        self.stop, self.is_done = tuple(stop), is_done
        self.text = ""
        self.token_ids: list[int] = []

    def add(self, delta: str) -> bool:
        """Append `delta`; True once the text is done."""
        start = self.text.rfind("\n") + 1
        self.text += delta
        return bool(delta) and self.is_done(self.text[start:], self.stop)


@dataclass(frozen=True)
class _Job:
    request_id: str
    ids: tuple[int, ...]
    sampling: Any  # vllm.SamplingParams
    stop: tuple[str, ...]
    rule: StopRule = StopRule.HARNESS_PYTHON


@dataclass(frozen=True)
class PreparedPrompt:
    """A request's prompt as the harness tokenizes it, and what vLLM must do with it."""

    ids: tuple[int, ...]  # input ids after (left) truncation
    n_prompt_tokens: int  # before truncation
    truncated: bool
    max_tokens: int  # 0: not generated (prompt at or over a total-length limit)


def prepare_prompt(
    full: Sequence[int],
    truncate: Callable[[int], Sequence[int]],
    request: GenRequest,
    model_max_len: int,
) -> PreparedPrompt:
    """hf.py's `_tokenize` and `_call` decisions for one request (pure). `full` is the prompt's
    untruncated ids, `truncate(limit)` the tokenizer's left truncation to `limit` tokens."""
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


class VllmBackend:
    """Loads one vLLM engine and serves every setting of its unit in one `generate` call."""

    multi_setting = True  # EngineSession hands it all settings of a unit at once

    def __init__(self) -> None:
        self.llm: Any = None
        self.tokenizer: Any = None
        self.engine: EngineSpec | None = None
        self.max_model_len = 0
        self.model_max_len = 2048
        self._sampling_extra: dict[str, float] = {}
        self._stop_token_ids: list[int] = []
        self._is_done: Callable[[str, Sequence[str]], bool] | None = None
        self._hf: Any = None  # workers.backends.hf.HfBackend, imported in load()
        self._batch = 0  # generate calls so far (request ids stay unique per engine)

    # -- loading -----------------------------------------------------------------------------

    def load(self, engine: EngineSpec) -> EngineInfo:
        opts = engine.vllm
        if engine.quant is Quant.INT8:
            raise UnsupportedSetting(
                "vLLM quantizes with bitsandbytes only to 4-bit in flight; 8-bit needs a "
                "pre-quantized checkpoint (use backend=hf or backend=auto)"
            )
        if opts.max_model_len is not None and opts.max_model_len < 1:
            raise UnsupportedSetting(f"vllm.max_model_len must be >= 1, got {opts.max_model_len}")
        vllm, torch, platform, env = import_configured(opts.batch_invariant)
        from workers.backends.hf import HfBackend, continuation_is_done

        # hf.py is the reference: its stopping rule, stop words and decoding are used as is.
        self._hf, self._is_done = HfBackend, continuation_is_done
        on_cpu = platform.is_cpu()
        check_batch_invariance(opts.batch_invariant, on_cpu, platform)
        quantization = check_quantization(engine, on_cpu)
        dtype = getattr(torch, VLLM_DTYPES[engine.dtype])
        if dtype not in platform.supported_dtypes:
            raise UnsupportedSetting(
                f"dtype {engine.dtype.value} is not supported by vLLM on {platform.device_name}"
            )
        name, revision, hf_config = self._load_tokenizer(engine)
        kwargs = self._engine_kwargs(engine, name, revision, on_cpu, quantization)
        started = time.perf_counter()
        try:
            self.llm = vllm.LLM(**kwargs)
        except (ValueError, RuntimeError) as e:
            raise UnsupportedSetting(f"vLLM could not load {name}: {e}") from e
        logger.info("vLLM engine for %s built in %.1fs", name, time.perf_counter() - started)
        self.engine = engine
        config = self.llm.llm_engine.vllm_config
        effective_dtype = str(config.model_config.dtype).removeprefix("torch.")
        if effective_dtype != VLLM_DTYPES[engine.dtype]:
            raise UnsupportedSetting(
                f"vLLM loaded {effective_dtype}, not the requested {engine.dtype.value}"
            )
        return EngineInfo(
            backend=BackendName.VLLM,
            backend_version=(
                f"{vllm_distribution()} (vllm {vllm.__version__}), torch {torch.__version__}"
            ),
            device="cpu" if on_cpu else f"cuda:{torch.cuda.get_device_name(0)}",
            effective_dtype=effective_dtype,
            model_revision=str(getattr(hf_config, "_commit_hash", None) or engine.model.revision),
            tokenizer_sha256=tokenizer_sha256(self.tokenizer),
            chat_template_sha256=sha256_of(getattr(self.tokenizer, "chat_template", None)),
            eos_token=self.tokenizer.eos_token,
            options=self._options(engine, kwargs, config, env),
        )

    def _load_tokenizer(self, engine: EngineSpec) -> tuple[str, str | None, Any]:
        """The HF tokenizer set up as hf.py sets it, the model's context length and generation
        config. Returns (model folder or id, revision, HF config)."""
        from transformers import AutoConfig, AutoTokenizer, GenerationConfig

        spec = engine.model
        local = Path(spec.repo_id).exists() or spec.builder is not None
        name = str(ensure_model(spec.repo_id, spec.builder)) if local else spec.repo_id
        revision = None if local else spec.revision
        hub = {"revision": revision, "trust_remote_code": spec.trust_remote_code}
        tokenizer = AutoTokenizer.from_pretrained(
            name, truncation_side="left", padding_side="right", **hub
        )
        if tokenizer.eos_token is None:
            if tokenizer.bos_token is None:
                raise UnsupportedSetting(f"tokenizer of {name} has neither eos nor bos token")
            tokenizer.eos_token = tokenizer.bos_token
        tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        hf_config = AutoConfig.from_pretrained(name, **hub)
        self.model_max_len = int(getattr(hf_config, "max_position_embeddings", 2048))
        self._read_generation_config(GenerationConfig, name, hub, tokenizer)
        return name, revision, hf_config

    def _engine_kwargs(self, engine: EngineSpec, name: str, revision: str | None, on_cpu: bool,
                       quantization: str | None) -> dict[str, Any]:  # fmt: skip
        opts = engine.vllm
        tp = opts.tensor_parallel_size or engine.model.num_gpus
        if on_cpu and tp != 1:
            logger.warning("tensor_parallel_size=%d ignored on CPU: one in-process engine", tp)
            tp = 1
        self.max_model_len = opts.max_model_len or self.model_max_len
        kwargs: dict[str, Any] = {
            "model": name,
            "tokenizer": name,
            "revision": revision,
            "tokenizer_revision": revision,
            "trust_remote_code": engine.model.trust_remote_code,
            "dtype": VLLM_DTYPES[engine.dtype],
            "max_model_len": self.max_model_len,
            "tensor_parallel_size": tp,
            "enforce_eager": opts.enforce_eager,
            "seed": 0,  # only unseeded requests would draw from it; this backend sends none
            # A prompt is prefilled in one piece. With chunked prefill, vLLM 0.32 on CPU fails on
            # a seeded request caught mid-prefill ("CPU Generator does not use offset": it
            # rewinds the request's generator after the discarded sample); off everywhere, a
            # prompt's prefill also no longer depends on what else is in the batch.
            "enable_chunked_prefill": False,
        }
        if tp > 1:
            # vLLM's own worker processes on the GPUs Ray gave this actor. Never "ray" inside a
            # Ray task: vLLM would reserve a second placement group and wait forever
            # (vllm#1566, #3190; lm-eval: "nested placement groups deadlock on V1").
            kwargs["distributed_executor_backend"] = "mp"
            os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
        if on_cpu:
            kwargs["kv_cache_memory_bytes"] = int(opts.cpu_kv_cache_gib * (1 << 30))
        else:
            kwargs["gpu_memory_utilization"] = opts.gpu_memory_utilization
        if quantization:
            kwargs["quantization"] = quantization
        if declares_stale_gguf(name):
            # A folder dequantised from GGUF by an older modelprep still says "gguf" in its
            # config.json, but holds plain safetensors; vLLM would refuse it.
            kwargs["hf_overrides"] = {"quantization_config": None}
        return kwargs

    def _options(self, engine: EngineSpec, kwargs: dict[str, Any], config: Any,
                 env: dict[str, str]) -> dict[str, str]:  # fmt: skip
        """The effective engine options, as strings (the settings table's provenance)."""
        opts = engine.vllm
        options = {
            "max_model_len": str(config.model_config.max_model_len),
            "max_model_len_source": (
                "vllm.max_model_len or the unit's largest max_length"
                if opts.max_model_len
                else "the model's context length (new_tokens settings)"
            ),
            "tensor_parallel_size": str(config.parallel_config.tensor_parallel_size),
            "distributed_executor_backend": kwargs.get("distributed_executor_backend", "uni"),
            "enforce_eager": str(opts.enforce_eager).lower(),
            "batch_invariant": str(opts.batch_invariant).lower(),
            "quantization": kwargs.get("quantization", "none"),
            "enable_chunked_prefill": "false",
            "enable_prefix_caching": str(bool(config.cache_config.enable_prefix_caching)).lower(),
            "stopping": "stop words in vLLM; harness rule by abort, then cut on the output ids",
            **{k.lower(): v for k, v in env.items()},
            **{f"generation_config.{k}": str(v) for k, v in self._sampling_extra.items()},
        }
        if "kv_cache_memory_bytes" in kwargs:
            options["kv_cache_memory_bytes"] = str(kwargs["kv_cache_memory_bytes"])
        else:
            options["gpu_memory_utilization"] = str(opts.gpu_memory_utilization)
        return options

    def _read_generation_config(self, generation_config_cls, name: str, hub: dict, tokenizer):
        """What HF's generate would take from generation_config.json besides our arguments."""
        try:
            config = generation_config_cls.from_pretrained(name, **hub)
        except OSError:
            config = generation_config_cls()
        for field in UNMAPPED_GENERATION_FIELDS:
            value = getattr(config, field, None)
            if value and value != NEUTRAL_GENERATION_VALUES.get(field):
                raise UnsupportedSetting(
                    f"the model's generation_config sets {field}={value!r}, which the vLLM "
                    "backend does not reproduce (use backend=hf)"
                )
        penalty = getattr(config, "repetition_penalty", None)
        if penalty not in (None, 1.0):
            self._sampling_extra["repetition_penalty"] = float(penalty)
        min_p = getattr(config, "min_p", None)
        if min_p:
            self._sampling_extra["min_p"] = float(min_p)
        eos = config.eos_token_id if config.eos_token_id is not None else tokenizer.eos_token_id
        self._stop_token_ids = [eos] if isinstance(eos, int) else list(eos or [])

    @property
    def eos_token(self) -> str | None:
        return self.tokenizer.eos_token if self.tokenizer is not None else None

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        return self._hf.render_chat(self, messages)  # the tokenizer's template, as hf.py

    def count_tokens(self, prompt: str, add_special_tokens: bool = True) -> int:
        return self._hf.count_tokens(self, prompt, add_special_tokens)

    def close(self) -> None:
        """Shut the engine down (its worker processes too, for tensor parallelism). The driver
        also kills the actor after the unit: vLLM does not reliably free memory in-process."""
        llm, self.llm = self.llm, None
        if llm is None:
            return
        core = getattr(llm.llm_engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        del llm
        import gc

        gc.collect()

    # -- generation --------------------------------------------------------------------------

    def prepare(self, request: GenRequest) -> PreparedPrompt:
        tok = self.tokenizer
        full = tok(request.prompt, add_special_tokens=request.add_special_tokens).input_ids

        def truncate(limit: int) -> Sequence[int]:
            # Through the tokenizer, so special tokens sit where the harness's
            # `tokenizer(..., truncation=True, max_length=...)` puts them.
            return tok(request.prompt, add_special_tokens=request.add_special_tokens,
                       truncation=True, max_length=limit).input_ids  # fmt: skip

        return prepare_prompt(full, truncate, request, self.model_max_len)

    def generate(
        self, requests: Sequence[GenRequest], global_seed: int | None = None
    ) -> list[Generation]:
        """Every request in one engine run (each with its own SamplingParams and seed), in
        request order. `global_seed` is ignored: vLLM has no global sampling stream, so sampled
        requests must carry their own seed (seed_policy=per_sample)."""
        if self.llm is None:
            raise RuntimeError("VllmBackend.generate called before load")
        prepared = [self.prepare(r) for r in requests]
        jobs: list[_Job] = []
        for index, (request, prep) in enumerate(zip(requests, prepared, strict=True)):
            if prep.max_tokens == 0:
                continue  # the harness does not generate from a prompt at the limit
            self._check_fits(request, prep)
            stop = self._stop_words(request)
            for sample, sampling in enumerate(self._sampling_params(request, prep, stop)):
                jobs.append(
                    _Job(
                        f"{self._batch}-{index}-{sample}",
                        prep.ids,
                        sampling,
                        stop,
                        request.stop_rule,
                    )
                )
        self._batch += 1
        started = time.perf_counter()
        outputs = self._run(jobs)
        logger.debug("vLLM: %d sequences, %d tokens in %.1fs", len(jobs),
                     sum(map(len, outputs.values())), time.perf_counter() - started)  # fmt: skip
        out: list[Generation] = []
        batch = self._batch - 1
        for index, (request, prep) in enumerate(zip(requests, prepared, strict=True)):
            for sample in range(request.n_samples):
                copy = sample if request.sampling.do_sample else 0  # greedy copies are equal
                ids = outputs.get(f"{batch}-{index}-{copy}", [])
                out.append(self._generation(request, prep, sample, ids))
        return out

    def _run(self, jobs: Sequence[_Job]) -> dict[str, list[int]]:
        """Drive the engine step by step (what LLM.generate does inside) and abort a sequence
        as soon as its text is done by the harness's rule, which vLLM's stop strings cannot
        express (a non-indented line, the first one included). Output ids per job id."""
        from vllm.inputs import TokensPrompt

        engine = self.llm.llm_engine
        states = {
            job.request_id: _StopState(job.stop, functools.partial(self._is_done, rule=job.rule))
            for job in jobs
        }
        finished = False
        try:
            for job in jobs:
                prompt = TokensPrompt(prompt_token_ids=list(job.ids))
                engine.add_request(job.request_id, prompt, job.sampling)
            while engine.has_unfinished_requests():
                done_early = []
                for result in engine.step():
                    state = states[result.request_id]
                    state.token_ids.extend(result.outputs[0].token_ids)
                    if state.add(result.outputs[0].text) and not result.finished:
                        done_early.append(result.request_id)
                if done_early:
                    engine.abort_request(done_early)
            finished = True
        finally:
            if not finished:  # leave no request behind for the next call
                engine.abort_request(list(states))
        return {rid: state.token_ids for rid, state in states.items()}

    def _check_fits(self, request: GenRequest, prep: PreparedPrompt) -> None:
        needed = len(prep.ids) + prep.max_tokens
        if needed > self.max_model_len:
            raise UnsupportedSetting(
                f"{request.task_id}: prompt ({len(prep.ids)} tokens) + output "
                f"({prep.max_tokens}) = {needed} tokens exceeds the engine's max_model_len "
                f"{self.max_model_len}; raise vllm.max_model_len"
            )

    def _stop_words(self, request: GenRequest) -> tuple[str, ...]:
        return self._hf._stop_words(self, request)  # the request's words + the tokenizer's eos

    def _sampling_params(
        self, request: GenRequest, prep: PreparedPrompt, stop: tuple[str, ...]
    ) -> list[Any]:
        """One SamplingParams per sequence to generate: greedy once (copies are identical),
        sampled once per sample with seed + sample (hf.py seeds each call with seed + call)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        s = request.sampling
        common = {
            "max_tokens": prep.max_tokens,
            "stop": list(stop),
            "output_kind": RequestOutputKind.DELTA,
            "stop_token_ids": self._stop_token_ids,
            "include_stop_str_in_output": True,
            "skip_special_tokens": False,  # the harness decodes with special tokens kept
            "spaces_between_special_tokens": False,
        }
        if "repetition_penalty" in self._sampling_extra:
            common["repetition_penalty"] = self._sampling_extra["repetition_penalty"]
        if not s.do_sample:
            return [SamplingParams(temperature=0.0, **common)]
        if s.seed is None:
            raise UnsupportedSetting(
                "vLLM has no global sampling stream: sampled settings need seed_policy=per_sample"
            )
        sampled = {"temperature": s.temperature, "top_p": s.top_p, **common}
        if s.top_k > 0:  # 0: off, as in HF
            sampled["top_k"] = s.top_k
        if "min_p" in self._sampling_extra:
            sampled["min_p"] = self._sampling_extra["min_p"]
        return [SamplingParams(seed=s.seed + i, **sampled) for i in range(request.n_samples)]

    def _harness_cut(self, request: GenRequest, output_ids: list[int]) -> int:
        """Output tokens the harness would have generated: its criterion decodes the output ids
        (batch_decode defaults) after every step and stops at the first done prefix."""
        stop = self._stop_words(request)
        assert self._is_done is not None

        def done(k: int) -> bool:  # batch_decode's defaults, as the criterion decodes
            text = self.tokenizer.decode(output_ids[:k])
            return self._is_done(text, stop, request.stop_rule)

        return first_done_index(len(output_ids), done)

    def _generation(
        self, request: GenRequest, prep: PreparedPrompt, sample: int, output_ids: list[int]
    ) -> Generation:
        output_ids = output_ids[: self._harness_cut(request, output_ids)]
        sequence = list(prep.ids) + output_ids
        continuation, mismatch = self._decode_continuation(request, sequence, len(prep.ids))
        if request.length_semantics is LengthSemantics.TOTAL:
            hit = prep.truncated or len(sequence) >= request.max_length
        else:
            hit = len(output_ids) >= request.max_length
        return Generation(
            task_id=request.task_id,
            sample_index=request.sample_offset + sample,
            continuation=continuation,
            n_prompt_tokens=prep.n_prompt_tokens,
            n_output_tokens=len(output_ids),
            prompt_truncated=prep.truncated,
            hit_length_limit=hit,
            output_token_ids=tuple(output_ids),
            decode_mismatch=mismatch,
        )

    def _decode_continuation(self, request: GenRequest, sequence: list[int], n_in: int):
        """hf.py's own decoding (it only uses the tokenizer): the full sequence decoded, a
        leading BOS dropped, special tokens kept, sliced at len(prompt) characters."""
        return self._hf._decode_continuation(self, request, sequence, n_in)


# -- load-time checks --------------------------------------------------------------------------
