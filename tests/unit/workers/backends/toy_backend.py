"""A third backend the project does not ship, registered by tests only: it proves that a backend
is one module and its registration (the driver never names one). Model-free and GPU-free; its
typed option `answer` is what every continuation returns, so a test can see the option reach
the worker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workers.backends.base import BackendDefinition, OptionField, options_of
from workers.spec import BackendOptions, EngineInfo, EngineSpec, Generation, GenRequest, Quant

# The continuation of a correct HumanEvalFix answer needs the problem; this one is a body that
# always runs: programs fail their tests, and the run completes.
DEFAULT_ANSWER = "\n    return None\n"


@dataclass(frozen=True)
class ToyOptions(BackendOptions):
    answer: str = DEFAULT_ANSWER


class ToyDefinition(BackendDefinition):
    name = "toy"
    engine = "tests.unit.workers.backends.toy_backend:ToyBackend"
    export_name = "toy-engine"
    loads_weights = False
    uses_gpus = False
    model_free = True
    config_block = "toy"
    option_fields = (OptionField("answer", str),)
    options_type = ToyOptions

    def skip_reason(self, setting) -> str | None:
        return (
            "the toy backend does not quantize" if setting.engine.quant is not Quant.NONE else None
        )

    def key_fields(self, engine: EngineSpec) -> dict[str, str]:
        return {"toy_answer": options_of(engine, ToyOptions).answer}


TOY = ToyDefinition()


class ToyBackend:
    def __init__(self) -> None:
        self.answer = DEFAULT_ANSWER

    def load(self, engine: EngineSpec) -> EngineInfo:
        self.answer = options_of(engine, ToyOptions).answer
        return EngineInfo(TOY.name, {"toy": "1"}, "none", "none", "r", None, None, None, {})

    @property
    def eos_token(self) -> str | None:
        return None

    def render_chat(self, messages) -> str:
        return "".join(m["content"] for m in messages)

    def generate(
        self, requests: Sequence[GenRequest], global_seed: int | None = None
    ) -> list[Generation]:
        return [
            Generation(r.task_id, r.sample_offset + i, self.answer, 1, 1, False, False)
            for r in requests
            for i in range(r.n_samples)
        ]

    def stream_state(self) -> bytes | None:
        return None

    def restore_stream(self, state: bytes) -> None:
        return None

    def close(self) -> None:
        return None
