"""Stop words and post-processing, identical to the harness (golden-tested on 452 cases).

Pure `str -> str` functions. The continuation is the model's text after the prompt, i.e. the
harness's `decoded[len(prompt):]`.
"""

from __future__ import annotations

from workers.benchmarks.humanevalfix.data import Problem
from workers.benchmarks.humanevalfix.prompts import (
    DIFF_TEMPLATES,
    UnsupportedTemplate,
    prompt_parts,
)
from workers.spec import Variant

# The task's module-level Python list (from CodeGeeX), plus what the task appends.
BASE_STOP_WORDS = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert")
ENDOFTEXT = "<|endoftext|>"

# The 16 lines the execution metric prepends to every candidate (code_eval_octopack).
IMPORT_HELPER = "\n".join(
    [
        "import math",
        "import re",
        "import sys",
        "import copy",
        "import datetime",
        "import itertools",
        "import collections",
        "import heapq",
        "import statistics",
        "import functools",
        "import hashlib",
        "import numpy",
        "import numpy as np",
        "import string",
        "from typing import *",
        "from collections import *",
    ]
)


def stop_words(template: str, eos_token: str | None = None) -> tuple[str, ...]:
    """Stop words for one template, built fresh (never a shared mutable list; see spec §10).

    `eos_token` is the tokenizer's eos, which the harness appends at generation time; it then
    also applies during post-processing because the harness mutates the task's list in place.
    """
    if template == "diff":
        words = ["<commit_before>", "<commit_msg>", "<commit_after>", ENDOFTEXT]
    elif template == "diff-carper":
        words = ["<BEF>", "<MSG>", "<DFF>", "\\ No newline at end of file", ENDOFTEXT]
    else:
        words = [*BASE_STOP_WORDS, ENDOFTEXT]
        if template == "starchat":
            words.append("<|end|>")
        elif template == "issue":
            words.append("```")
    if eos_token:
        words.append(eos_token)
    return tuple(dict.fromkeys(words))  # order kept, duplicates (harmless in the harness) gone


def remove_last_block(code: str, words: tuple[str, ...]) -> str:
    """Cut at the earliest stop word, then before the first non-indented non-empty line."""
    for word in words:
        if word in code:
            code = code[: code.find(word)]
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if len(line.strip()) > 0 and line[0] != " " and line[0] != "\t":
            return "\n".join(lines[:i])
    return code


def postprocess(
    problem: Problem,
    variant: Variant,
    template: str,
    continuation: str,
    eos_token: str | None = None,
) -> str:
    """The candidate program the harness scores: prompt base (rstripped) + the cut body."""
    if template in DIFF_TEMPLATES:
        raise UnsupportedTemplate(
            f"template {template!r} makes the model emit a diff, which the harness applies with "
            "external patchers; reprogrid renders these prompts but does not score them"
        )
    body = remove_last_block(continuation.rstrip(), stop_words(template, eos_token))
    return prompt_parts(problem, variant).prompt_base.rstrip() + body


def program_for(candidate: str, problem: Problem) -> str:
    """The file the execution metric runs: imports + candidate (stripped) + "\\n" + "\\n" + test."""
    return (IMPORT_HELPER + "\n" + candidate).strip() + "\n" + "\n" + problem.test


def reference_candidate(problem: Problem, variant: Variant, solution: str) -> str:
    """What `--check_references` scores: the prompt base followed by a full solution body."""
    return prompt_parts(problem, variant).prompt_base + solution
