"""The replay backend: raw continuations produced elsewhere, read from a JSONL file.

Each line is `{"task_id", "sample_index", "continuation"}`; the continuation is the model's text
after the prompt, so it goes through the same post-processing, execution and storage as a
generated one. Token counts are unknown (recorded as 0).

The file is the top-level `replay_path`: a path, or a pattern naming `{model}`, `{variant}` and
`{template}` (one file per model, variant and template of a sweep). Its content hash, not its
path, is part of the setting key. No library, no weights, no GPU.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.backends.base import (
    BackendDefinition,
    BackendOptionError,
    UnsupportedSetting,
    options_of,
)
from workers.spec import (
    BackendOptions,
    EngineInfo,
    EngineSpec,
    Generation,
    GenRequest,
    ModelSpec,
    SettingSpec,
)

# What a `replay_path` pattern may name: one file per model, variant and template of a sweep.
REPLAY_FIELDS = ("model", "variant", "template")
NO_FILE_REASON = "backend=replay needs replay_path (a JSONL of raw continuations)"


@dataclass(frozen=True)
class ReplayOptions(BackendOptions):
    pattern: str | None = None  # `replay_path` as configured (None: not set)
    path: str | None = None  # one cell's file (the pattern filled)
    sha256: str | None = None  # its content hash (part of the key)


def parse_pattern(value: Any) -> str | None:
    """`replay_path`: a file, or a pattern naming `{model}`, `{variant}` and `{template}`;
    any other placeholder is a BackendOptionError naming the valid ones."""
    if value is None:
        return None
    text = str(value)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as e:
        raise BackendOptionError(
            f"replay_path {text!r}: {e} (write {{{{ and }}}} for braces)"
        ) from e
    for name in fields:
        if name not in REPLAY_FIELDS:
            close = difflib.get_close_matches(name, REPLAY_FIELDS, n=1)
            hint = f" Did you mean: {close[0]}?" if close else ""
            raise BackendOptionError(
                f"Unknown replay_path placeholder {name!r}.{hint} Valid: {', '.join(REPLAY_FIELDS)}"
            )
    return text


class ReplayDefinition(BackendDefinition):
    name = "replay"
    engine = "workers.backends.replay:ReplayBackend"
    export_name = "replay"
    loads_weights = False
    uses_gpus = False
    model_free = True
    options_type = ReplayOptions

    def options(self, values: Mapping[str, Any], config: Mapping[str, Any]) -> ReplayOptions:
        return ReplayOptions(pattern=parse_pattern(config.get("replay_path")))

    def files(
        self, options: BackendOptions, model: ModelSpec, values: Mapping[str, Any]
    ) -> list[str]:
        pattern = _as_replay(options).pattern
        if pattern is None:
            return []
        return [
            pattern.format(model=model.name, variant=values["variant"], template=values["template"])
        ]

    def bind(
        self,
        options: BackendOptions,
        model: ModelSpec,
        values: Mapping[str, Any],
        hashes: Mapping[str, str],
    ) -> ReplayOptions:
        replay = _as_replay(options)
        files = self.files(replay, model, values)
        if not files:
            return replay
        return ReplayOptions(replay.pattern, files[0], hashes.get(files[0]))

    def skip_reason(self, setting: SettingSpec) -> str | None:
        return None if options_of(setting.engine, ReplayOptions).path else NO_FILE_REASON

    def key_fields(self, engine: EngineSpec) -> dict[str, Any]:
        return {"replay_sha256": options_of(engine, ReplayOptions).sha256}


def _as_replay(options: BackendOptions) -> ReplayOptions:
    if not isinstance(options, ReplayOptions):
        raise TypeError(f"replay options expected, got {type(options).__name__}")
    return options


REPLAY = ReplayDefinition()


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
        path = options_of(engine, ReplayOptions).path
        if not path:
            raise UnsupportedSetting(NO_FILE_REASON)
        self.table = read_continuations(path)
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        return EngineInfo(
            backend=REPLAY.name,
            backend_versions={},  # no library generates: the text is read back
            device="none",
            effective_dtype="none",
            model_revision=engine.model.revision,
            tokenizer_sha256="",
            chat_template_sha256=None,
            eos_token=None,
            options={"replay_path": path, "replay_sha256": digest},
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
