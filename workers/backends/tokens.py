"""Tokenizer-only access to a model (no weights): prompt token counts and chat rendering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.backends.modelprep import ensure_model
from workers.spec import ModelSpec


@dataclass
class TokenizerHandle:
    tokenizer: Any

    def count(self, prompt: str, add_special_tokens: bool = True) -> int:
        return len(self.tokenizer(prompt, add_special_tokens=add_special_tokens).input_ids)

    def render_chat(self, messages: Sequence[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=True
        )


def load_tokenizer(model: ModelSpec) -> TokenizerHandle:
    from transformers import AutoTokenizer

    local = Path(model.repo_id).exists() or model.builder is not None
    name = str(ensure_model(model.repo_id, model.builder)) if local else model.repo_id
    tok = AutoTokenizer.from_pretrained(
        name,
        revision=None if local else model.revision,
        trust_remote_code=model.trust_remote_code,
        truncation_side="left",
    )
    return TokenizerHandle(tok)
