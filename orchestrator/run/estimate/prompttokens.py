"""Prompt lengths in tokens for the cost model, without loading a model.

Where the model's `tokenizer.json` is on this machine (its local or built folder, or the HF
cache at its revision) it is read with the `tokenizers` library (Rust; no torch, no
transformers), so counts are exact (special tokens included, as the harness tokenizes).
Elsewhere a stated prior turns characters into tokens (`estimate.chars_per_token`).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workers.spec import ModelSpec

logger = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"


def tokenizer_file(model: ModelSpec) -> str | None:
    """The model's tokenizer.json on this machine, or None."""
    local = os.path.join(model.repo_id, TOKENIZER_FILE)
    if os.path.isfile(local):
        return local
    if model.builder is not None or os.path.isabs(model.repo_id):
        return None  # a folder not built yet: nothing cached under a Hub id either
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(model.repo_id, TOKENIZER_FILE, revision=model.revision)
    except ValueError:  # not a valid Hub id
        return None
    return found if isinstance(found, str) else None


@dataclass
class TokenCounter:
    """Counts prompt tokens of one model; memoised (settings of a grid share their prompts)."""

    chars_per_token: float
    tokenizer: Any = None  # a tokenizers.Tokenizer, or None: the characters prior
    source: str = "prior"  # "tokenizer" or "prior"
    _memo: dict[str, int] = field(default_factory=dict)

    def count(self, text: str) -> int:
        if text not in self._memo:
            if self.tokenizer is not None:
                self._memo[text] = len(self.tokenizer.encode(text).ids)
            else:
                self._memo[text] = math.ceil(len(text) / self.chars_per_token)
        return self._memo[text]

    def count_all(self, texts: Sequence[str]) -> list[int]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing and self.tokenizer is not None:
            for text, encoding in zip(missing, self.tokenizer.encode_batch(missing), strict=True):
                self._memo[text] = len(encoding.ids)
        return [self.count(t) for t in texts]


def token_counter(model: ModelSpec, chars_per_token: float) -> TokenCounter:
    """An exact counter where the tokenizer is at hand, else the characters prior."""
    path = tokenizer_file(model)
    if path is None:
        return TokenCounter(chars_per_token)
    try:
        from tokenizers import Tokenizer
    except ImportError:  # a slim driver environment: the prior
        return TokenCounter(chars_per_token)
    try:
        return TokenCounter(chars_per_token, Tokenizer.from_file(path), "tokenizer")
    except Exception as e:  # tokenizers raises a plain Exception for a malformed file
        logger.warning("tokenizer %s unreadable (%s): prompt lengths from the prior", path, e)
        return TokenCounter(chars_per_token)
