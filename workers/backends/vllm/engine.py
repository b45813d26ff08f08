"""The vLLM backend: the fast path for full sweeps, with the BigCode harness's semantics where
vLLM can express them, and a documented, measured difference where it cannot (docs/vllm.md).

Same as hf.py (the reference), through the same harness.py and tokens.py: prompts tokenized
by the HF tokenizer set up as for hf.py and passed as token ids; the limit counts prompt +
output tokens, a prompt at or over it is not generated from and is flagged; the harness's
stopping rule (a stop word or a non-indented line) ends the output: vLLM stops on the stop
words, the engine is stepped and a sequence aborted once its text is done, and the output ids
are cut where the harness's criterion (decoding the output ids) first holds; the continuation
is the full sequence decoded (BOS dropped) sliced at len(prompt). Different: the unit's
requests share batches (continuous batching), and sampling uses a per-request seed
(seed_policy=per_sample), not the harness's global stream.

vLLM, torch and transformers are imported in `load()`, after the environment is set.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workers.backends.base import UnsupportedSetting, options_of
from workers.backends.harness import (
    DEFAULT_CONTEXT_LENGTH,
    PreparedPrompt,
    build_generation,
    context_length,
    continuation_is_done,
    harness_cut,
    stop_words,
    tokenize_prompt,
)
from workers.backends.tokens import (
    ModelSource,
    chat_template_sha256,
    harness_tokenizer,
    render_chat,
    resolve_model_source,
    resolved_revision,
    tokenizer_sha256,
)
from workers.backends.vllm import VLLM, VllmOptions
from workers.backends.vllm.setup import (
    VLLM_DTYPES,
    GenerationDefaults,
    check_batch_invariance,
    check_quantization,
    engine_kwargs,
    engine_options,
    import_configured,
    read_generation_defaults,
    vllm_distributions,
)
from workers.spec import (
    EngineInfo,
    EngineSpec,
    Generation,
    GenRequest,
    Quant,
    StopRule,
)

logger = logging.getLogger(__name__)


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


class VllmBackend:
    """Loads one vLLM engine and serves every setting of its unit in one `generate` call."""

    def __init__(self) -> None:
        self.llm: Any = None
        self.tokenizer: Any = None
        self.engine: EngineSpec | None = None
        self.max_model_len = 0
        self.model_max_len = DEFAULT_CONTEXT_LENGTH
        self._defaults = GenerationDefaults()
        self._batch = 0  # generate calls so far (request ids stay unique per engine)

    # -- loading -----------------------------------------------------------------------------

    def load(self, engine: EngineSpec) -> EngineInfo:
        opts = options_of(engine, VllmOptions)
        if engine.quant is Quant.INT8:
            raise UnsupportedSetting(
                "vLLM quantizes with bitsandbytes only to 4-bit in flight; 8-bit needs a "
                "pre-quantized checkpoint (use backend=hf or backend=auto)"
            )
        if opts.max_model_len is not None and opts.max_model_len < 1:
            raise UnsupportedSetting(f"vllm.max_model_len must be >= 1, got {opts.max_model_len}")
        vllm, torch, platform, env = import_configured(opts.batch_invariant)
        on_cpu = platform.is_cpu()
        check_batch_invariance(opts.batch_invariant, on_cpu, platform)
        quantization = check_quantization(engine, on_cpu)
        if getattr(torch, VLLM_DTYPES[engine.dtype]) not in platform.supported_dtypes:
            raise UnsupportedSetting(
                f"dtype {engine.dtype.value} is not supported by vLLM on {platform.device_name}"
            )
        source, hf_config = self._load_tokenizer(engine)
        self.max_model_len = opts.max_model_len or self.model_max_len
        kwargs = engine_kwargs(engine, source, on_cpu, quantization, self.max_model_len)
        started = time.perf_counter()
        try:
            self.llm = vllm.LLM(**kwargs)
        except (ValueError, RuntimeError) as e:
            raise UnsupportedSetting(f"vLLM could not load {source.name}: {e}") from e
        logger.info("vLLM engine for %s built in %.1fs", source.name, time.perf_counter() - started)
        self.engine = engine
        config = self.llm.llm_engine.vllm_config
        effective_dtype = str(config.model_config.dtype).removeprefix("torch.")
        if effective_dtype != VLLM_DTYPES[engine.dtype]:
            raise UnsupportedSetting(
                f"vLLM loaded {effective_dtype}, not the requested {engine.dtype.value}"
            )
        return EngineInfo(
            backend=VLLM.name,
            # the module's own version under "vllm" (what an export names), which a vllm
            # distribution's metadata may put otherwise (a local build)
            backend_versions={
                **vllm_distributions(),
                "vllm": vllm.__version__,
                "torch": torch.__version__,
            },
            device="cpu" if on_cpu else f"cuda:{torch.cuda.get_device_name(0)}",
            effective_dtype=effective_dtype,
            model_revision=resolved_revision(hf_config, engine.model),
            tokenizer_sha256=tokenizer_sha256(self.tokenizer),
            chat_template_sha256=chat_template_sha256(self.tokenizer),
            eos_token=self.tokenizer.eos_token,
            options=engine_options(engine, kwargs, config, env, self._defaults),
        )

    def _load_tokenizer(self, engine: EngineSpec) -> tuple[ModelSource, Any]:
        """The HF tokenizer set up as for hf.py, the model's context length and generation
        defaults. Returns (where the model comes from, its HF config)."""
        from transformers import AutoConfig

        source = resolve_model_source(engine.model)
        self.tokenizer = harness_tokenizer(source)
        hf_config = AutoConfig.from_pretrained(source.name, **source.hub_kwargs)
        self.model_max_len = context_length(hf_config)
        self._defaults = read_generation_defaults(source, self.tokenizer)
        return source, hf_config

    @property
    def eos_token(self) -> str | None:
        return self.tokenizer.eos_token if self.tokenizer is not None else None

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        return render_chat(self.tokenizer, messages)

    def stream_state(self) -> bytes | None:
        return None  # no global sampling stream: sampled requests carry their own seeds

    def restore_stream(self, state: bytes) -> None:
        raise UnsupportedSetting("vLLM has no global sampling stream to continue")

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
        return tokenize_prompt(self.tokenizer, request, self.model_max_len)

    def generate(
        self, requests: Sequence[GenRequest], global_seed: int | None = None
    ) -> list[Generation]:
        """Every request in one engine run (each with its own SamplingParams and seed), in
        request order. `global_seed` is ignored: vLLM has no global sampling stream, so sampled
        requests must carry their own seed (seed_policy=per_sample)."""
        if self.llm is None:
            raise RuntimeError("VllmBackend.generate called before load")
        prepared = [self.prepare(r) for r in requests]
        batch = self._batch
        jobs: list[_Job] = []
        for index, (request, prep) in enumerate(zip(requests, prepared, strict=True)):
            if prep.max_tokens == 0:
                continue  # the harness does not generate from a prompt at the limit
            self._check_fits(request, prep)
            stop = stop_words(request, self.tokenizer.eos_token)
            for sample, sampling in enumerate(self._sampling_params(request, prep, stop)):
                job_id = f"{batch}-{index}-{sample}"
                jobs.append(_Job(job_id, prep.ids, sampling, stop, request.stop_rule))
        self._batch += 1
        started = time.perf_counter()
        outputs = self._run(jobs)
        n_tokens = sum(map(len, outputs.values()))
        elapsed = time.perf_counter() - started
        logger.debug("vLLM: %d sequences, %d tokens in %.1fs", len(jobs), n_tokens, elapsed)
        out: list[Generation] = []
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
            job.request_id: _StopState(
                job.stop, functools.partial(continuation_is_done, rule=job.rule)
            )
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

    def _sampling_params(
        self, request: GenRequest, prep: PreparedPrompt, stop: tuple[str, ...]
    ) -> list[Any]:
        """One SamplingParams per sequence to generate: greedy once (copies are identical),
        sampled once per sample with seed + sample (hf.py seeds each call with seed + call)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        s = request.sampling
        common: dict[str, Any] = {
            "max_tokens": prep.max_tokens,
            "stop": list(stop),
            "output_kind": RequestOutputKind.DELTA,
            "stop_token_ids": list(self._defaults.stop_token_ids),
            "include_stop_str_in_output": True,
            "skip_special_tokens": False,  # the harness decodes with special tokens kept
            "spaces_between_special_tokens": False,
        }
        if "repetition_penalty" in self._defaults.sampling_extra:
            common["repetition_penalty"] = self._defaults.sampling_extra["repetition_penalty"]
        if not s.do_sample:
            return [SamplingParams(temperature=0.0, **common)]
        if s.seed is None:
            raise UnsupportedSetting(
                "vLLM has no global sampling stream: sampled settings need seed_policy=per_sample"
            )
        sampled: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p, **common}
        if s.top_k > 0:  # 0: off, as in HF
            sampled["top_k"] = s.top_k
        if "min_p" in self._defaults.sampling_extra:
            sampled["min_p"] = self._defaults.sampling_extra["min_p"]
        return [SamplingParams(seed=s.seed + i, **sampled) for i in range(request.n_samples)]

    def _generation(
        self, request: GenRequest, prep: PreparedPrompt, sample: int, output_ids: list[int]
    ) -> Generation:
        """The sample as the harness would have produced it: the output ids cut where its
        criterion (decoding the output ids) first holds, then decoded as hf.py decodes."""
        stop = stop_words(request, self.tokenizer.eos_token)
        cut = harness_cut(self.tokenizer, output_ids, stop, request.stop_rule)
        return build_generation(self.tokenizer, request, prep, sample, output_ids[:cut])
