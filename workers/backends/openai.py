"""An OpenAI-compatible server as a backend (vLLM's OpenAI server, or any `/completions`
endpoint that takes token-id prompts), with the harness's semantics, as the in-process vLLM
backend has them (harness.py, tokens.py): the model's tokenizer (on the worker) tokenizes,
truncates and counts each prompt, sent as ids with `max_tokens` = what the length limit leaves
(a prompt at the limit is not sent, and is flagged); the stop words go as `stop`; the Python
rule (a non-indented line), checked on the streamed text, ends a request by closing its stream
(vLLM aborts it); the output ids are cut where the harness's criterion first holds. Sampled
requests carry their own `seed`. Precision, batching and kernels are the server's. Standard
library only: the driver imports the definition; transformers loads in `load`, on the worker.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from workers.backends import harness, tokens
from workers.backends.base import (
    BackendDefinition,
    BackendOptionError,
    BackendUnavailable,
    OptionField,
    UnsupportedSetting,
    options_of,
)
from workers.spec import (
    BackendOptions,
    Dtype,
    EngineInfo,
    EngineSpec,
    Generation,
    GenRequest,
    Quant,
    SettingSpec,
    StopRule,
)

NO_URL_REASON = (
    "backend=openai needs openai.base_url: the server's OpenAI API root "
    "(e.g. openai.base_url=http://127.0.0.1:8000/v1)"
)
PRECISION_REASON = (
    "backend=openai: the server fixed the model's precision when it started (vllm serve "
    "--dtype/--quantization); a precision axis cannot change it, so only the default precision "
    "(fp32, no quantization) runs, standing for whatever the server runs"
)
HARNESS_SEED_REASON = (
    "an OpenAI-compatible server has no global sampling stream: sampled settings need "
    "seed_policy=per_sample (samples repeat where the server honours `seed`)"
)
# Every body: streamed, one sample per request, and vLLM's extra parameters (other servers
# ignore or refuse them): the output token ids, text decoded as the harness decodes (special
# tokens kept). No `stop`: the API takes at most 4 (the harness has 9 for HumanEvalFix); the
# whole rule, stop words included, is checked on the stream, which is closed once it holds.
STREAMED: dict[str, Any] = {
    "stream": True,
    "echo": False,
    "n": 1,
    "return_token_ids": True,
    "skip_special_tokens": False,
    "spaces_between_special_tokens": False,
}
Job = tuple[dict[str, Any], tuple[str, ...], StopRule]  # a body, its stop words and rule
RETOKENIZED = "re-tokenized from the returned text (the server returns none; stored empty)"


@dataclass(frozen=True)
class OpenAIOptions(BackendOptions):
    base_url: str | None = None  # the API root (".../v1"); None: every cell is a skip row
    model: str | None = None  # the served model name; None: the model's repo_id
    concurrency: int = 32  # requests in flight (one stream each): the server batches them
    timeout_s: float = 600.0  # per wait on the server: connecting, and between streamed chunks
    # The NAME of an environment variable holding the API key, read on the worker at load: a
    # secret must not enter the spec, the plan's output or the stored rows.
    api_key_env: str | None = None


class OpenAIDefinition(BackendDefinition):
    name = "openai"
    engine = "workers.backends.openai:OpenAIBackend"
    export_name = "openai-compatible server"
    library = "transformers"  # the model's tokenizer, loaded on the worker
    distributions = ("transformers", "tokenizers")
    loads_weights = False  # the server holds them
    uses_gpus = False  # the server's GPUs, not the cluster's
    batched = True  # concurrent requests: chunks by count
    config_block = "openai"
    option_fields = (
        OptionField("base_url", str, nullable=True),
        OptionField("model", str, nullable=True),
        OptionField("concurrency", int, low=1, high=4096),
        OptionField("timeout_s", float, low=0, low_open=True),
        OptionField("api_key_env", str, nullable=True),
    )
    options_type = OpenAIOptions

    def options(self, values: Mapping[str, Any], config: Mapping[str, Any]) -> OpenAIOptions:
        url = values.get("base_url")
        if url is None:
            return OpenAIOptions(**values)
        if not str(url).startswith(("http://", "https://")):
            raise BackendOptionError(f"openai.base_url must start with http(s)://, got {url!r}")
        return OpenAIOptions(**{**values, "base_url": str(url).rstrip("/")})

    def skip_reason(self, setting: SettingSpec) -> str | None:
        engine = setting.engine
        if options_of(engine, OpenAIOptions).base_url is None:
            return NO_URL_REASON
        if engine.dtype is not Dtype.FP32 or engine.quant is not Quant.NONE:
            return PRECISION_REASON
        return HARNESS_SEED_REASON if setting.sequential_stream else None

    def key_fields(self, engine: EngineSpec) -> dict[str, Any]:
        # What produced the output: a served name set explicitly (null: the model's repo_id,
        # keyed already). Not keyed: base_url (where, not what), concurrency, timeout_s and the
        # key (each request is independent and carries its own seed).
        model = options_of(engine, OpenAIOptions).model
        return {"openai_model": model} if model is not None else {}


OPENAI = OpenAIDefinition()


class ServerError(RuntimeError):
    """The server answered with an error: the URL, the status and the server's own message."""


def completion_bodies(
    model: str, prompt: Sequence[int], request: GenRequest, max_tokens: int
) -> list[dict[str, Any]]:
    """The `/completions` bodies of one request: greedy once (copies are identical), sampled
    once per sample with seed + sample (the in-process vLLM backend's seeds). top_k is always
    sent (0: off, as in HF), so a model's generation_config cannot add one on the server."""
    s = request.sampling
    common = {"model": model, "prompt": list(prompt), "max_tokens": max_tokens, **STREAMED}
    if not s.do_sample:
        return [{**common, "temperature": 0.0}]
    if s.seed is None:
        raise UnsupportedSetting(HARNESS_SEED_REASON)
    sampled = {**common, "temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k}
    return [{**sampled, "seed": s.seed + i} for i in range(request.n_samples)]


def done_since(text: str, before: int, stop: Sequence[str], rule: StopRule) -> bool:
    """Is `text` done by the harness's rule, given `text[:before]` was not? Only what can have
    changed is checked again: the line that was still growing, and the characters where a stop
    word reaching into it could begin (so the check is exact, and cheap per streamed chunk)."""
    line = text.rfind("\n", 0, before) + 1
    tail = text[max(0, before - max(map(len, stop), default=0)) :]
    grown = harness.continuation_is_done(text[line:], stop, rule)
    return grown or harness.continuation_is_done(tail, stop, StopRule.STOP_WORDS)


@dataclass
class Completion:
    """A streamed completion's events, folded together; done by the harness's rule."""

    stop: tuple[str, ...] = ()
    rule: StopRule = StopRule.STOP_WORDS  # no stop words and this rule: never done early
    text: str = ""
    token_ids: list[int] | None = None  # None: the server sent none
    fingerprint: str | None = None  # the server's system_fingerprint

    def feed(self, line: bytes) -> bool:
        """Fold one server-sent-events line in; True once the stream ends or the text is done."""
        data = line.decode("utf-8").strip()
        if not data.startswith("data:"):
            return False  # a blank line, a comment or another field
        if data[5:].strip() == "[DONE]":
            return True
        event = json.loads(data[5:])
        if "error" in event:
            raise ServerError(f"the server stopped the completion: {event['error']}")
        self.fingerprint = event.get("system_fingerprint") or self.fingerprint
        choice = event["choices"][0]
        if choice.get("token_ids") is not None:
            self.token_ids = (self.token_ids or []) + list(choice["token_ids"])
        before, delta = len(self.text), choice.get("text") or ""
        self.text += delta
        return bool(delta) and done_since(self.text, before, self.stop, self.rule)


@dataclass(frozen=True)
class Client:
    base_url: str
    headers: Mapping[str, str]
    timeout_s: float

    def open(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        url = self.base_url + path
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(url, data=data, headers=dict(self.headers))
        try:
            return urllib.request.urlopen(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:800]
            raise ServerError(f"{url} answered HTTP {e.code}: {detail}") from e
        except OSError as e:  # refused, unreachable, timed out (URLError is an OSError)
            raise self.unavailable(url, getattr(e, "reason", e)) from e

    def unavailable(self, url: str, reason: object) -> BackendUnavailable:
        return BackendUnavailable(
            f"no OpenAI-compatible server answers at {url} ({reason}): start it (e.g. `vllm "
            f"serve MODEL --port PORT`), or set openai.base_url to where it listens "
            f"(now {self.base_url}); openai.timeout_s={self.timeout_s:g}"
        )

    def complete(self, body: Mapping[str, Any], completion: Completion) -> Completion:
        """One streamed completion folded into `completion`, read until the server ends it or
        its text is done; leaving early closes the connection, and the server aborts it."""
        with self.open("/completions", body) as response:
            try:
                for line in response:
                    if completion.feed(line):
                        break
            except (OSError, http.client.HTTPException) as e:
                raise self.unavailable(self.base_url + "/completions", e) from e
        return completion


def api_headers(api_key_env: str | None) -> dict[str, str]:
    """Request headers; the key from the variable `api_key_env` names. Read here, on the worker,
    against STYLE rule 9 on purpose: the spec would carry the secret into the plan and store."""
    headers = {"Content-Type": "application/json"}
    if api_key_env is None:
        return headers
    key = os.environ.get(api_key_env)
    if not key:
        raise UnsupportedSetting(
            f"openai.api_key_env={api_key_env!r}: that variable is not set where the engine runs"
        )
    return {**headers, "Authorization": f"Bearer {key}"}


class OpenAIBackend:
    """Generates a unit's requests on a server, `concurrency` streams at a time."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.options = OpenAIOptions()
        self.tokenizer: Any = None
        self.served = ""
        self.model_max_len = harness.DEFAULT_CONTEXT_LENGTH  # the model's (new_tokens cut)
        self.server_max_len: int | None = None  # what the server accepts, where it says

    def load(self, engine: EngineSpec) -> EngineInfo:
        """Check the server serves the model (before anything else: a clear error when it is
        down), load the model's tokenizer, then probe one token to learn what the server
        returns. UnsupportedSetting for what this server cannot run."""
        self.options = opts = options_of(engine, OpenAIOptions)
        if opts.base_url is None:
            raise UnsupportedSetting(NO_URL_REASON)
        self.client = Client(opts.base_url, api_headers(opts.api_key_env), opts.timeout_s)
        self.served = opts.model or engine.model.repo_id
        with self.client.open("/models") as response:
            models = {m.get("id"): m for m in json.loads(response.read()).get("data", [])}
        if self.served not in models:
            raise UnsupportedSetting(
                f"the server at {opts.base_url} serves {sorted(map(str, models))}, not "
                f"{self.served!r}: set openai.model to the served name"
            )
        served = models[self.served]
        self.server_max_len = served.get("max_model_len")
        from transformers import AutoConfig

        source = tokens.resolve_model_source(engine.model)
        self.tokenizer = tokens.harness_tokenizer(source)
        hf_config = AutoConfig.from_pretrained(source.name, **source.hub_kwargs)
        self.model_max_len = harness.context_length(hf_config)
        probe = self._probe(self.client)
        return EngineInfo(
            backend=OPENAI.name,
            # The server is the engine: its fingerprint (vLLM's names its version,
            # "vllm-0.32.0-e57928c0") under the engine's export name.
            backend_versions={OPENAI.export_name: str(probe.fingerprint or served.get("owned_by"))},
            device="server",
            effective_dtype="unreported",  # the server's choice; the API does not say
            model_revision=tokens.resolved_revision(hf_config, engine.model),
            tokenizer_sha256=tokens.tokenizer_sha256(self.tokenizer),
            chat_template_sha256=tokens.chat_template_sha256(self.tokenizer),
            eos_token=self.tokenizer.eos_token,
            options=self._provenance(served, probe),
        )

    def _probe(self, client: Client) -> Completion:
        """One greedy token: the server takes our prompts, and says whether it returns ids."""
        prompt = list(self.tokenizer("def f():").input_ids)
        body = {"model": self.served, "prompt": prompt, "max_tokens": 1, "temperature": 0.0}
        return client.complete({**body, **STREAMED}, Completion())

    def _provenance(self, served: Mapping[str, Any], probe: Completion) -> dict[str, str]:
        opts = self.options
        return {
            "base_url": str(opts.base_url),
            "served_model": self.served,
            "server_root": str(served.get("root")),  # vLLM: the model folder or id it loaded
            "server_max_model_len": str(self.server_max_len),
            "system_fingerprint": str(probe.fingerprint),
            "output_token_ids": "server" if probe.token_ids is not None else RETOKENIZED,
            "concurrency": str(opts.concurrency),
            "timeout_s": str(opts.timeout_s),
            "api_key": f"${opts.api_key_env}" if opts.api_key_env else "none",
            "stopping": "the harness's rule (stop words included) on the streamed text "
            "closes the stream (the server aborts the request); cut on the output ids",
        }

    @property
    def eos_token(self) -> str | None:
        return self.tokenizer.eos_token if self.tokenizer is not None else None

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        return tokens.render_chat(self.tokenizer, messages)

    def stream_state(self) -> bytes | None:
        return None  # no global sampling stream: sampled requests carry their own seeds

    def restore_stream(self, state: bytes) -> None:
        raise UnsupportedSetting(HARNESS_SEED_REASON)

    def close(self) -> None:
        self.client = None  # no connection outlives its request

    def generate(
        self, requests: Sequence[GenRequest], global_seed: int | None = None
    ) -> list[Generation]:
        """Every request, `concurrency` at a time, in request order. `global_seed` is ignored:
        sampled requests carry their own seed (seed_policy=per_sample)."""
        if self.client is None:
            raise RuntimeError("OpenAIBackend.generate called before load")
        prepared = [
            harness.tokenize_prompt(self.tokenizer, r, self.model_max_len) for r in requests
        ]
        jobs: dict[tuple[int, int], Job] = {}
        for index, (request, prep) in enumerate(zip(requests, prepared, strict=True)):
            if prep.max_tokens == 0:
                continue  # the harness does not generate from a prompt at the limit
            stop = harness.stop_words(request, self.tokenizer.eos_token)
            self._check_fits(request, prep)
            bodies = completion_bodies(self.served, prep.ids, request, prep.max_tokens)
            for sample, body in enumerate(bodies):
                jobs[(index, sample)] = (body, stop, request.stop_rule)
        replies = self._run(self.client, jobs)
        out: list[Generation] = []
        for index, (request, prep) in enumerate(zip(requests, prepared, strict=True)):
            for sample in range(request.n_samples):
                copy = sample if request.sampling.do_sample else 0  # greedy copies are equal
                out.append(self._generation(request, prep, sample, replies.get((index, copy))))
        return out

    def _check_fits(self, request: GenRequest, prep: harness.PreparedPrompt) -> None:
        needed = len(prep.ids) + prep.max_tokens
        if self.server_max_len is not None and needed > self.server_max_len:
            raise UnsupportedSetting(
                f"{request.task_id}: prompt ({len(prep.ids)} tokens) + output "
                f"({prep.max_tokens}) = {needed} tokens exceeds the server's max_model_len "
                f"{self.server_max_len}; serve the model with a larger --max-model-len"
            )

    def _run(
        self, client: Client, jobs: Mapping[tuple[int, int], Job]
    ) -> dict[tuple[int, int], Completion]:
        def one(body: dict[str, Any], stop: tuple[str, ...], rule: StopRule) -> Completion:
            return client.complete(body, Completion(stop, rule))

        pool = ThreadPoolExecutor(max_workers=self.options.concurrency)
        try:
            futures = {key: pool.submit(one, *job) for key, job in jobs.items()}
            return {key: future.result() for key, future in futures.items()}
        finally:  # a failed request ends the call: nothing more is sent
            pool.shutdown(wait=True, cancel_futures=True)

    def _generation(
        self,
        request: GenRequest,
        prep: harness.PreparedPrompt,
        sample: int,
        reply: Completion | None,
    ) -> Generation:
        """The sample as the harness would have produced it: the output ids (the server's, or
        the text re-tokenized where it returns none) cut where its criterion first holds."""
        if reply is None:
            return harness.build_generation(self.tokenizer, request, prep, sample, [])
        ids = reply.token_ids
        if ids is None:
            ids = list(self.tokenizer(reply.text, add_special_tokens=False).input_ids)
        stop = harness.stop_words(request, self.tokenizer.eos_token)
        cut = harness.harness_cut(self.tokenizer, ids, stop, request.stop_rule)
        made = harness.build_generation(self.tokenizer, request, prep, sample, ids[:cut])
        return made if reply.token_ids is not None else replace(made, output_token_ids=())
