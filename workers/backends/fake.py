"""A deterministic, model-free backend for orchestration tests (never for results).

The "model" id may carry test knobs: `fake://delay=0.05,fail-on=[INST]` sleeps per request and
raises for prompts containing the given text (to test per-setting failures);
`fake://fail-load=FILE` appends a line to FILE at every load and then raises (to test that a
failed load is reported once per unit, with its own error); `fake://barrier=DIR:N` makes the
first request of every engine wait until N engines have reached it (to test that N replicas are
placed at once: with fewer placed, it times out and raises). For simulated runs at cluster scale
(perf/cluster_sim.py): `load=S` sleeps S seconds in `load`, `delay-<precision>=S` (e.g.
`delay-int8=0.4`) replaces `delay` for engines of that precision, and `jitter=J` scales each
request's delay by a factor in [1-J, 1+J] drawn from the hash of the model's name and the
prompt (mean 1, the same in every run; the model's name in it, because templates such as
`instruct` give every model the same prompts, and one factor shared by every model would move
the whole grid's work off the plan's instead of averaging out). Its engine options record when
its process started and when the load began, so a simulation can tell Ray's start of an engine
from the load.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence

from workers.backends.base import BackendDefinition, UnsupportedSetting
from workers.spec import EngineInfo, EngineSpec, Generation, GenRequest, precision_label


class FakeDefinition(BackendDefinition):
    """Model-free and deterministic, but scheduled like a model: it holds the GPUs it is given
    (tests fake GPU resources), so orchestration tests see real placement."""

    name = "fake"
    engine = "workers.backends.fake:FakeBackend"
    export_name = "fake"
    loads_weights = False
    model_free = True


FAKE = FakeDefinition()


class FakeFailure(RuntimeError):
    pass


def _knobs(repo_id: str) -> dict[str, str]:
    spec = repo_id.removeprefix("fake://")
    return dict(part.split("=", 1) for part in spec.split(",") if "=" in part)


BARRIER_TIMEOUT_S = 120.0


def process_started_at() -> float | None:
    """When this process started (epoch seconds), from /proc; None where there is no /proc."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith("btime"))
    except (OSError, ValueError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _barrier(spec: str) -> None:
    """Wait until `count` engines have written their pid into `folder` (test knob)."""
    folder, _, count = spec.rpartition(":")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, str(os.getpid())), "w", encoding="utf-8") as fh:
        fh.write(os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while len(os.listdir(folder)) < int(count):
        if time.monotonic() > deadline:
            raise FakeFailure(f"only {len(os.listdir(folder))} of {count} engines ran at once")
        time.sleep(0.1)


class FakeBackend:
    def __init__(self) -> None:
        self._waited = False
        self.knobs: dict[str, str] = {}
        self.delay = 0.0
        self.model_name = ""

    def _request_delay(self, request: GenRequest) -> float:
        jitter = float(self.knobs.get("jitter", 0))
        if not jitter:
            return self.delay
        drawn = f"{self.model_name}|{request.prompt}|{request.sampling}"
        digest = hashlib.sha256(drawn.encode()).digest()
        unit = int.from_bytes(digest[:8], "big") / 2**64  # uniform in [0, 1)
        return self.delay * (1.0 + jitter * (2.0 * unit - 1.0))

    def load(self, engine: EngineSpec) -> EngineInfo:
        self.knobs = _knobs(engine.model.repo_id)
        self.model_name = engine.model.name
        if "fail-load" in self.knobs:
            with open(self.knobs["fail-load"], "a", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()}\n")
            raise FakeFailure("forced load failure")
        process = process_started_at()
        started = {
            "process_started_at": "" if process is None else f"{process:.2f}",
            "load_started_at": f"{time.time():.3f}",
        }
        precision = precision_label(engine.dtype, engine.quant)
        self.delay = float(self.knobs.get(f"delay-{precision}", self.knobs.get("delay", 0)))
        time.sleep(float(self.knobs.get("load", 0)))
        # The GPUs Ray assigned, so scheduling tests can see which fake GPU served the unit.
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        return EngineInfo(
            FAKE.name,
            {},  # no library generates: the text is made up
            "none",
            engine.dtype.value,
            engine.model.revision,
            "",
            None,
            "</s>",
            {"cuda_visible_devices": gpus, **started},
        )

    @property
    def eos_token(self) -> str | None:
        return "</s>"

    def render_chat(self, messages) -> str:
        return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)

    def generate(
        self, requests: Sequence[GenRequest], global_seed: int | None = None
    ) -> list[Generation]:
        out = []
        if "barrier" in self.knobs and not self._waited:
            self._waited = True
            _barrier(self.knobs["barrier"])
        for request in requests:
            if "fail-on" in self.knobs and self.knobs["fail-on"] in request.prompt:
                raise FakeFailure(
                    f"forced failure for a prompt containing {self.knobs['fail-on']!r}"
                )
            time.sleep(self._request_delay(request))
            for i in range(request.n_samples):
                digest = hashlib.sha256(
                    f"{request.prompt}|{request.sampling}|{i}".encode()
                ).hexdigest()
                text = f"\n    return None  # {digest[:8]}\n"
                out.append(
                    Generation(
                        request.task_id,
                        request.sample_offset + i,
                        text,
                        len(request.prompt) // 4,
                        8,
                        False,
                        False,
                    )
                )
        return out

    def stream_state(self) -> bytes | None:
        return None  # deterministic: no random stream

    def restore_stream(self, state: bytes) -> None:
        raise UnsupportedSetting("the fake backend has no random stream")

    def close(self) -> None:
        pass
