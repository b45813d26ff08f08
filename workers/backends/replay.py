"""The replay backend: raw continuations produced elsewhere, read from a JSONL file.

Each line is `{"task_id", "sample_index", "continuation"}`; the continuation is the model's text
after the prompt, so it goes through the same post-processing, execution and storage as a
generated one. Token counts are unknown (recorded as 0).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from workers.backends.base import UnsupportedSetting
from workers.spec import BackendName, EngineInfo, EngineSpec, Generation, GenRequest


class ReplayError(ValueError):
    pass


def read_continuations(path: str) -> dict[tuple[str, int], str]:
    table: dict[tuple[str, int], str] = {}
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = (str(row["task_id"]), int(row["sample_index"]))
                text = row["continuation"]
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise ReplayError(
                    f"{path}:{line_no}: expected {{task_id, sample_index, continuation}} ({e})"
                ) from e
            if not isinstance(text, str):
                raise ReplayError(f"{path}:{line_no}: continuation must be a string")
            if key in table:
                raise ReplayError(f"{path}:{line_no}: duplicate {key}")
            table[key] = text
    return table


class ReplayBackend:
    def __init__(self) -> None:
        self.table: dict[tuple[str, int], str] = {}

    def load(self, engine: EngineSpec) -> EngineInfo:
        if not engine.replay_path:
            raise UnsupportedSetting("backend=replay needs replay_path")
        self.table = read_continuations(engine.replay_path)
        digest = hashlib.sha256(Path(engine.replay_path).read_bytes()).hexdigest()
        return EngineInfo(
            backend=BackendName.REPLAY,
            backend_version="replay",
            device="none",
            effective_dtype="none",
            model_revision=engine.model.revision,
            tokenizer_sha256="",
            chat_template_sha256=None,
            eos_token=None,
            options={"replay_path": engine.replay_path, "replay_sha256": digest},
        )

    @property
    def eos_token(self) -> str | None:
        return None

    def render_chat(self, messages) -> str:
        raise UnsupportedSetting("backend=replay cannot render chat templates")

    def generate(
        self, requests: Sequence[GenRequest], global_seed: int | None = None
    ) -> list[Generation]:
        out = []
        for request in requests:
            for i in range(request.n_samples):
                index = request.sample_offset + i
                try:
                    text = self.table[(request.task_id, index)]
                except KeyError:
                    raise ReplayError(
                        f"replay file has no continuation for {request.task_id} sample {index}"
                    ) from None
                out.append(Generation(request.task_id, index, text, 0, 0, False, False))
        return out

    def stream_state(self) -> bytes | None:
        return None  # replayed text: no random stream

    def restore_stream(self, state: bytes) -> None:
        raise UnsupportedSetting("backend=replay has no random stream")

    def close(self) -> None:
        self.table = {}
