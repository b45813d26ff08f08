"""A model's tokenizer, loaded and set up once for every backend and command: where the model
comes from (a local or built folder, or a hub id at a revision), the tokenizer as the harness
sets it up, its provenance hashes, chat rendering and token counts.

transformers is imported inside the functions that load: vllm.py imports this module before it
sets the environment vLLM and torch read at import time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.backends.base import UnsupportedSetting
from workers.backends.modelprep import ensure_model
from workers.spec import ModelSpec


@dataclass(frozen=True)
class ModelSource:
    """What `from_pretrained` gets for a model."""

    name: str  # a local folder (built first when a builder is configured), or a hub id
    revision: str | None  # None for a local folder: its files are what they are
    trust_remote_code: bool

    @property
    def hub_kwargs(self) -> dict[str, Any]:
        """The `from_pretrained` arguments besides the name."""
        return {"revision": self.revision, "trust_remote_code": self.trust_remote_code}


def resolve_model_source(model: ModelSpec) -> ModelSource:
    """A `repo_id` that exists on disk, or any model with a builder, is a local folder
    (`ensure_model` builds it when missing); anything else is a hub id at `model.revision`."""
    if Path(model.repo_id).exists() or model.builder is not None:
        folder = ensure_model(model.repo_id, model.builder)
        return ModelSource(str(folder), None, model.trust_remote_code)
    return ModelSource(model.repo_id, model.revision, model.trust_remote_code)


def open_tokenizer(source: ModelSource) -> Any:
    """The model's tokenizer with left truncation (the harness cuts over-long prompts from the
    left) and right padding (the harness's default; it slices the padding off)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        source.name, truncation_side="left", padding_side="right", **source.hub_kwargs
    )


def harness_tokenizer(source: ModelSource) -> Any:
    """`open_tokenizer`, then the harness's special tokens: eos falls back to bos (a stop word
    and the pad token need one), and pad = eos."""
    tokenizer = open_tokenizer(source)
    if tokenizer.eos_token is None:
        if tokenizer.bos_token is None:
            raise UnsupportedSetting(f"tokenizer of {source.name} has neither eos nor bos token")
        tokenizer.eos_token = tokenizer.bos_token
    tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def sha256_of(text: str | None) -> str | None:
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text is not None else None


def tokenizer_sha256(tokenizer: Any) -> str:
    """The hash of the tokenizer's full definition (fast tokenizers) or its vocabulary."""
    backend_tok = getattr(tokenizer, "backend_tokenizer", None)
    text = backend_tok.to_str() if backend_tok is not None else str(tokenizer.get_vocab())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chat_template_sha256(tokenizer: Any) -> str | None:
    return sha256_of(getattr(tokenizer, "chat_template", None))


def render_chat(tokenizer: Any, messages: Sequence[dict[str, str]]) -> str:
    """The tokenizer's chat template applied to `messages`, with the generation prompt."""
    if not getattr(tokenizer, "chat_template", None):
        raise UnsupportedSetting("template 'chat': the tokenizer has no chat template")
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)


def count_tokens(tokenizer: Any, prompt: str, add_special_tokens: bool = True) -> int:
    return len(tokenizer(prompt, add_special_tokens=add_special_tokens).input_ids)


@dataclass
class TokenizerHandle:
    """Tokenizer-only access to a model (no weights), for commands such as `prompts`."""

    tokenizer: Any

    def count(self, prompt: str, add_special_tokens: bool = True) -> int:
        return count_tokens(self.tokenizer, prompt, add_special_tokens)

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        return render_chat(self.tokenizer, messages)


def load_tokenizer(model: ModelSpec) -> TokenizerHandle:
    return TokenizerHandle(open_tokenizer(resolve_model_source(model)))


def resolved_revision(config: Any, model: ModelSpec) -> str:
    """The commit the loaded files came from (transformers records it for hub downloads), else
    the configured revision."""
    return str(getattr(config, "_commit_hash", None) or model.revision)
