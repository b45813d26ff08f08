"""The OpenAI-compatible server backend: its definition (options, skips, keys), the pure wire
(request bodies, the stream's stopping check, server-sent events), and the backend against a
small in-process HTTP stub that streams a scripted continuation with the tiny model's tokenizer
(a real vLLM server: tests/integration/test_openai_backend.py)."""

from __future__ import annotations

import dataclasses
import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from workers.backends.base import BackendOptionError, BackendUnavailable, UnsupportedSetting
from workers.backends.harness import continuation_is_done
from workers.backends.openai import (
    HARNESS_SEED_REASON,
    NO_URL_REASON,
    OPENAI,
    PRECISION_REASON,
    RETOKENIZED,
    Completion,
    OpenAIBackend,
    OpenAIOptions,
    ServerError,
    api_headers,
    completion_bodies,
    done_since,
)
from workers.backends.registry import get_backend
from workers.keys import setting_key
from workers.spec import (
    BackendOptions,
    BenchmarkSpec,
    DecodingSpec,
    Dtype,
    EngineSpec,
    GenRequest,
    LengthSemantics,
    ModelSpec,
    Quant,
    SamplingSpec,
    SeedPolicy,
    SettingSpec,
    StopRule,
    Tuning,
)

URL = "http://127.0.0.1:8000/v1"
STOP = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert", "<|endoftext|>")
GREEDY = SamplingSpec(False, 1.0, 1.0, 0, None)
MODEL = ModelSpec("tiny", "org/tiny", "r1", "tiny", 0.0003, Tuning.INSTRUCT, "yi")


def engine(spec: ModelSpec = MODEL, **options: Any) -> EngineSpec:
    opts = OpenAIOptions(**{"base_url": URL, **options})
    return EngineSpec(spec, "openai", Dtype.FP32, Quant.NONE, options=opts)


def setting(eng: EngineSpec | None = None, **changes: Any) -> SettingSpec:
    base = SettingSpec(
        eng or engine(),
        BenchmarkSpec("humanevalfix", "tests", "data"),
        "instruct",
        DecodingSpec("greedy", False),
        512,
    )
    return dataclasses.replace(base, **changes)


def request(prompt: str = "def add(a, b):", **changes: Any) -> GenRequest:
    base = GenRequest("Python/0", prompt, 1, 1, GREEDY, 96, LengthSemantics.TOTAL, STOP)
    return dataclasses.replace(base, **changes)


# -- the definition ------------------------------------------------------------------------------


def test_the_definition_states_what_the_driver_needs():
    assert get_backend("openai") is OPENAI
    assert (OPENAI.loads_weights, OPENAI.uses_gpus, OPENAI.batched) == (False, False, True)
    assert OPENAI.auto_rank is None and not OPENAI.model_free
    assert OPENAI.config_block == "openai" and OPENAI.export_name


def test_options_check_the_url_and_strip_its_slash():
    values = {"base_url": URL + "/", "model": None, "concurrency": 4, "timeout_s": 5.0}
    assert OPENAI.options({**values, "api_key_env": None}, {}).base_url == URL
    assert OPENAI.options({}, {}) == OpenAIOptions()  # no block in the config: defaults
    with pytest.raises(BackendOptionError, match=r"openai.base_url .*'127.0.0.1:8000'"):
        OPENAI.options({**values, "base_url": "127.0.0.1:8000"}, {})


T08 = DecodingSpec("t0.8", True, 0.8, 0.95, 0)


@pytest.mark.parametrize(
    ("cell", "reason"),
    [
        (setting(), None),
        (setting(engine(base_url=None)), NO_URL_REASON),
        (setting(dataclasses.replace(engine(), dtype=Dtype.BF16)), PRECISION_REASON),
        (setting(dataclasses.replace(engine(), quant=Quant.INT8)), PRECISION_REASON),
        (setting(decoding=T08), HARNESS_SEED_REASON),  # the harness's global stream
        (setting(decoding=T08, seed_policy=SeedPolicy.PER_SAMPLE), None),
    ],
)
def test_skip_rules(cell, reason):
    assert OPENAI.skip_reason(cell) == reason


def test_only_the_served_name_is_keyed_never_where_or_how_fast():
    assert OPENAI.key_fields(engine()) == {}
    assert OPENAI.key_fields(engine(model="served")) == {"openai_model": "served"}
    key = setting_key(setting())
    elsewhere = engine(base_url="http://other:9/v1", concurrency=1, timeout_s=3.0)
    assert setting_key(setting(engine(api_key_env="KEY"))) == key
    assert setting_key(setting(elsewhere)) == key
    assert setting_key(setting(engine(model="served"))) != key
    vllm = dataclasses.replace(engine(), backend="vllm", options=BackendOptions())
    assert setting_key(setting(vllm)) != key  # another backend, another key


# -- the wire ------------------------------------------------------------------------------------


def test_greedy_is_one_body_and_sampling_one_seeded_body_per_sample():
    (greedy,) = completion_bodies("m", (1, 2), request(n_samples=3), 50)
    assert greedy["prompt"] == [1, 2] and greedy["max_tokens"] == 50
    assert greedy["temperature"] == 0.0 and "seed" not in greedy
    assert greedy["stream"] and greedy["return_token_ids"] and "stop" not in greedy
    sampled = SamplingSpec(True, 0.8, 0.95, 0, 7)
    bodies = completion_bodies("m", (1,), request(n_samples=3, sampling=sampled), 50)
    assert [b["seed"] for b in bodies] == [7, 8, 9]  # the in-process vLLM backend's seeds
    assert {(b["temperature"], b["top_p"], b["top_k"], b["n"]) for b in bodies} == {
        (0.8, 0.95, 0, 1)
    }
    unseeded = dataclasses.replace(sampled, seed=None)
    with pytest.raises(UnsupportedSetting, match="per_sample"):
        completion_bodies("m", (1,), request(sampling=unseeded), 50)


TEXTS = [
    "\n    return a + b\nprint(add(1, 2))\n",
    "    x = 1\n    # keep\n    y = 2\n\ndef other():\n",
    "\n    s = 'a<|endoftext|>b'\n    return s\n",
    "\n    return 1\n\n\n    \n",
    "pass\n",
]


@pytest.mark.parametrize("rule", list(StopRule))
@pytest.mark.parametrize("text", TEXTS)
def test_the_stream_check_is_exact_for_every_chunking(text, rule):
    """Checked chunk by chunk, the text is done at the first chunk whose whole prefix the
    harness's rule calls done: never earlier, never later."""
    rng = random.Random(0)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(text)), k=min(4, len(text) - 1)))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        so_far, found, expected = "", None, None
        for i, chunk in enumerate(chunks):
            before, so_far = len(so_far), so_far + chunk
            if found is None and done_since(so_far, before, STOP, rule):
                found = i
            if expected is None and continuation_is_done(so_far, STOP, rule):
                expected = i
        assert found == expected, chunks


def sse(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event)}\n".encode()


def test_server_sent_events_fold_into_a_completion():
    done = Completion(STOP, StopRule.HARNESS_PYTHON)
    assert not done.feed(b": keep-alive\n") and not done.feed(b"\n")
    first = {"choices": [{"text": "\n    x", "token_ids": [1, 2]}]}
    assert not done.feed(sse(first))
    last = {"choices": [{"text": " = 1\nfoo", "token_ids": [3]}], "system_fingerprint": "f1"}
    assert done.feed(sse(last))  # a non-indented line
    assert (done.text, done.token_ids, done.fingerprint) == ("\n    x = 1\nfoo", [1, 2, 3], "f1")
    bare = Completion()
    assert not bare.feed(sse({"choices": [{"text": "\nfoo"}]}))  # no rule: only [DONE] ends it
    assert bare.token_ids is None and bare.feed(b"data: [DONE]\n")
    with pytest.raises(ServerError, match="out of memory"):
        bare.feed(sse({"error": {"message": "out of memory"}}))


def test_the_key_comes_from_the_named_variable_on_the_worker(monkeypatch):
    assert api_headers(None) == {"Content-Type": "application/json"}
    monkeypatch.setenv("TEST_OPENAI_KEY", "s3cret")
    assert api_headers("TEST_OPENAI_KEY")["Authorization"] == "Bearer s3cret"
    monkeypatch.delenv("TEST_OPENAI_KEY")
    with pytest.raises(UnsupportedSetting, match="TEST_OPENAI_KEY"):
        api_headers("TEST_OPENAI_KEY")


# -- the backend against a stub server -----------------------------------------------------------

SCRIPT = "\n    return a + b\nprint(add(1, 2))\n" + "    x = 1\n" * 20


class Stub:
    """An OpenAI-compatible server in a thread: it serves `name`, streams SCRIPT one token a
    chunk (with or without the token ids), and records the bodies and how many chunks each
    stream got out before the client left."""

    def __init__(self, tokenizer: Any, name: str, token_ids: bool = True):
        self.tokenizer, self.name, self.token_ids = tokenizer, name, token_ids
        self.bodies: list[dict[str, Any]] = []
        self.sent: list[int] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                data = {"data": [{"id": stub.name, "max_model_len": 2048, "owned_by": "stub"}]}
                self._send(200, json.dumps(data).encode())

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.bodies.append(body)
                if body["max_tokens"] > 1000:
                    self._send(400, b'{"error": {"message": "max_tokens too large"}}')
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                stub.sent.append(self._stream(body["max_tokens"]))

            def _stream(self, limit: int) -> int:
                ids = stub.tokenizer(SCRIPT, add_special_tokens=False).input_ids[:limit]
                for n, token in enumerate(ids):
                    choice = {"text": stub.tokenizer.decode([token])}
                    if stub.token_ids:
                        choice["token_ids"] = [token]
                    try:
                        self.wfile.write(sse({"choices": [choice]}) + b"\n")
                        self.wfile.flush()
                    except OSError:
                        return n  # the client left
                    time.sleep(0.01)
                self.wfile.write(b"data: [DONE]\n\n")
                return len(ids)

            def _send(self, code: int, data: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def __enter__(self) -> Stub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> ModelSpec:
    pytest.importorskip("transformers")
    from workers.backends.modelprep import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny")
    return dataclasses.replace(MODEL, repo_id=str(path))


@pytest.fixture(scope="module")
def tokenizer(tiny):
    from workers.backends.tokens import harness_tokenizer, resolve_model_source

    return harness_tokenizer(resolve_model_source(tiny))


@pytest.fixture
def stub(tokenizer, tiny) -> Iterator[Stub]:
    with Stub(tokenizer, tiny.repo_id) as running:
        yield running


def cut_at_the_print_line(continuation: str) -> bool:
    """The scripted continuation as the harness ends it: the body, then the first token of the
    non-indented `print` line (the harness stops after the token that makes the text done)."""
    body = "\n    return a + b\n"
    rest = continuation.removeprefix(body)
    return continuation.startswith(body) and rest != "" and "print".startswith(rest)


def loaded(stub: Stub, tiny: ModelSpec, **options: Any) -> OpenAIBackend:
    backend = OpenAIBackend()
    info = backend.load(engine(tiny, base_url=stub.url, **options))
    assert info.backend == "openai" and info.options["served_model"] == stub.name
    assert info.eos_token == "</s>" and info.options["server_max_model_len"] == "2048"
    return backend


def test_generates_with_the_harness_rule_and_closes_the_stream_once_done(stub, tiny):
    backend = loaded(stub, tiny)
    assert stub.bodies[0]["max_tokens"] == 1  # the load's probe
    (made,) = backend.generate([request()])
    assert cut_at_the_print_line(made.continuation)
    prompt_ids = stub.tokenizer("def add(a, b):").input_ids
    assert stub.bodies[-1]["prompt"] == prompt_ids and made.n_prompt_tokens == len(prompt_ids)
    assert stub.bodies[-1]["max_tokens"] == 96 - len(prompt_ids)  # total-length semantics
    assert made.output_token_ids and len(made.output_token_ids) == made.n_output_tokens
    time.sleep(0.3)  # the stub notices the closed stream at its next write
    total = len(stub.tokenizer(SCRIPT, add_special_tokens=False).input_ids)
    assert stub.sent[-1] < total  # the client left early


def test_a_prompt_at_the_limit_is_flagged_and_never_sent(stub, tiny):
    backend = loaded(stub, tiny)
    sent = len(stub.bodies)
    (made,) = backend.generate([request(max_length=4)])
    assert made.prompt_truncated and made.n_output_tokens == 0 and made.continuation == ""
    assert len(stub.bodies) == sent


def test_without_token_ids_the_text_is_retokenized_and_no_ids_are_stored(tokenizer, tiny):
    with Stub(tokenizer, tiny.repo_id, token_ids=False) as stub:
        backend = OpenAIBackend()
        info = backend.load(engine(tiny, base_url=stub.url))
        assert info.options["output_token_ids"] == RETOKENIZED
        (made,) = backend.generate([request()])
    assert cut_at_the_print_line(made.continuation)
    assert made.output_token_ids == () and made.n_output_tokens


def test_server_errors_name_the_url_and_the_servers_message(stub, tiny):
    with pytest.raises(UnsupportedSetting, match="serves .*not 'other'.*openai.model"):
        OpenAIBackend().load(engine(tiny, base_url=stub.url, model="other"))
    backend = loaded(stub, tiny)
    with pytest.raises(ServerError, match="HTTP 400: .*max_tokens too large"):
        backend.generate([request(max_length=1500)])
    with pytest.raises(UnsupportedSetting, match="exceeds the server's max_model_len 2048"):
        backend.generate([request(max_length=2100, length_semantics=LengthSemantics.NEW_TOKENS)])


def test_a_server_that_is_down_is_a_clear_error_at_load():
    with socket.socket() as s:  # a free port: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(BackendUnavailable, match=f"no OpenAI-compatible server answers at {url}"):
        OpenAIBackend().load(engine(base_url=url))
