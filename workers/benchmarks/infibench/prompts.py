"""Generation protocol (spec §2): system prompts, prompt formats, sampling defaults, trimming.

* The system prompt depends on the grading keys, not the question type: a case whose only
  `grading:` key is `similarity` gets the "answer as briefly as possible" prompt.
* Chat models get `[system, user]` messages, as the official API callers send them; models
  without a chat template get `system + "\\n" + question` (task `code-ffqa-v2`; `-no-n` joins
  without the newline, `-endn` adds a trailing one).
* Responses are the newly generated text cut at the first end-of-turn marker or EOS string,
  which is what `infibench_infer_post_processor.py` leaves (nothing is stripped).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from workers.benchmarks.infibench.suite import Case

NON_QA_SYSTEM_PROMPT = (
    "You are a professional assistant for programmers. "
    "By default, questions and answers are in Markdown format."
)
QA_SYSTEM_PROMPT = (
    "You are a professional assistant for programmers. "
    "By default, questions and answers are in Markdown format. "
    "You are chatting with programmers, so please answer as briefly as possible."
)
# Cut points of the official post-processor (Qwen/ChatML, Yuan, Gemma, Llama-3 x2).
END_MARKERS = ("<|im_end|>", "<eod>", "<end_of_turn>", "<|end_of_text|>", "<|eot_id|>")


@dataclass(frozen=True)
class GenerationDefaults:
    temperature: float = 0.2  # official protocol (API callers and HF runs)
    top_p: float = 0.9
    n_samples: int = 30  # 3 groups of 10 for best@10 ± std; the leaderboard used 10 for a few
    max_new_tokens: int = 1024  # the HF runs; the OpenAI caller set no limit


GENERATION_DEFAULTS = GenerationDefaults()


class PromptFormat(StrEnum):
    DEFAULT = "code-ffqa-v2"  # system + "\n" + question
    NO_NEWLINE = "code-ffqa-v2-no-n"  # system + question
    END_NEWLINE = "code-ffqa-v2-endn"  # system + "\n" + question + "\n"


def system_prompt(case: Case) -> str:
    keys = case.criteria.keys
    return QA_SYSTEM_PROMPT if "similarity" in keys and len(keys) == 1 else NON_QA_SYSTEM_PROMPT


def chat_messages(case: Case) -> list[dict[str, str]]:
    """The messages for a model with a chat template: system prompt, then the question."""
    return [
        {"role": "system", "content": system_prompt(case)},
        {"role": "user", "content": case.prompt},
    ]


def default_prompt(case: Case, fmt: PromptFormat = PromptFormat.DEFAULT) -> str:
    """The plain-text prompt for a model without a chat template (the CSV `prompt` column)."""
    if fmt is PromptFormat.NO_NEWLINE:
        return system_prompt(case) + case.prompt
    text = system_prompt(case) + "\n" + case.prompt
    return text + "\n" if fmt is PromptFormat.END_NEWLINE else text


def trim_response(continuation: str, eos_token: str | None = None) -> str:
    """Cut newly generated text at the first end marker or `eos_token`; nothing else changes.

    The official script's `--eos` defaults to "</s>"; pass the tokenizer's EOS string.
    """
    cut = len(continuation)
    for marker in (*END_MARKERS, *((eos_token,) if eos_token else ())):
        index = continuation.find(marker, 0, cut)
        if index != -1:
            cut = index
    return continuation[:cut]
