"""Prompt text for every HumanEvalFix template, byte-identical to the BigCode harness.

Transcribed from `bigcode_eval/tasks/humanevalpack.py` (harness commit 8fc5bae); the golden file
`humanevalfix-golden-prompts.jsonl` pins all 24 x 2 x 164 strings and a test checks every row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workers.benchmarks.humanevalfix.data import Problem
from workers.spec import Variant

# Templates that live in the Fix class itself (checked first by the harness).
FIX_TEMPLATES = ("file", "starcodercommit", "diff", "diff-carper", "issue")
# Templates of the generic HumanEvalPack builder.
GENERIC_TEMPLATES = (
    "instruct",
    "octocoder",
    "octogeex",
    "starchat",
    "instructcodet5p",
    "wizardcoder",
    "codellama",
    "deepseek",
    "tulu",
    "gritlm",
    "zephyr",
    "yi",
    "starchat2",
    "codeqwen",
    "codegemma",
    "codellama-70b",
    "aurora-m",
)
HARNESS_TEMPLATES = tuple(sorted(set(FIX_TEMPLATES) | set(GENERIC_TEMPLATES)))
# Not a harness template: the instruction rendered through the tokenizer's own chat template.
CHAT_TEMPLATE = "chat"
# Templates whose output is a diff; the harness applies it with external patchers. We render
# their prompts but refuse to run them (see UnsupportedTemplate).
DIFF_TEMPLATES = ("diff", "diff-carper")

DEEPSEEK_SYSTEM = (
    "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by "
    "Deepseek Company, and you only answer questions related to computer science. For "
    "politically sensitive questions, security and privacy issues, and other non-computer "
    "science questions, you will refuse to answer"
)
ALPACA_HEADER = (
    "Below is an instruction that describes a task. Write a response that appropriately "
    "completes the request.\n\n### Instruction:\n"
)


class UnknownTemplate(ValueError):
    """A template name the harness does not accept for HumanEvalFix."""


class UnsupportedTemplate(ValueError):
    """A template the harness accepts but reprogrid cannot score (diff outputs)."""


@dataclass(frozen=True)
class PromptParts:
    prompt_base: str  # what the fixed program starts with (declaration or prompt)
    instruction: str  # "Fix bugs in <entry_point>."
    context: str  # buggy function (+ "\n" + test in the tests variant)


def prompt_parts(problem: Problem, variant: Variant) -> PromptParts:
    prompt_base = problem.prompt if variant is Variant.DOCS else problem.declaration
    context = prompt_base + problem.buggy_solution
    if variant is Variant.TESTS:
        context += "\n" + problem.test
    return PromptParts(prompt_base, f"Fix bugs in {problem.entry_point}.", context)


def model_input(parts: PromptParts, template: str) -> str:
    """The harness's `inp`: context first for `instruct`, instruction first for the others."""
    if template == "instruct":
        return parts.context + "\n" + parts.instruction
    return parts.instruction + "\n" + parts.context


_GENERIC: dict[str, Callable[[str, str], str]] = {
    "instruct": lambda inp, base: f"{inp}\n\n{base}",
    "octocoder": lambda inp, base: f"Question: {inp}\n\nAnswer:\n{base}",
    "octogeex": lambda inp, base: f"Question: {inp.strip()}\n\nAnswer:\n{base}",
    "starchat": lambda inp, base: (
        f"<|system|>\n<|end|>\n<|user|>\n{inp}<|end|>\n<|assistant|>\n{base}"
    ),
    "instructcodet5p": lambda inp, base: f"{ALPACA_HEADER}{inp}\n\n### Response:{base}",
    "wizardcoder": lambda inp, base: f"{ALPACA_HEADER}{inp}\n\n### Response:\n{base}",
    "codellama": lambda inp, base: f"[INST] {inp.strip()} [/INST] {base}",
    "deepseek": lambda inp, base: (
        f"{DEEPSEEK_SYSTEM}\n### Instruction:\n{inp.strip()}\n### Response:\n{base}"
    ),
    "tulu": lambda inp, base: f"<|user|>\n{inp}\n<|assistant|>\n{base}",
    "gritlm": lambda inp, base: f"<|user|>\n{inp}\n<|assistant|>\n{base}",
    "zephyr": lambda inp, base: f"<|user|>\n{inp}</s>\n<|assistant|>\n{base}",
    "yi": lambda inp, base: f"<|im_start|>user\n{inp}<|im_end|>\n<|im_start|>assistant\n{base}",
    "starchat2": lambda inp, base: (
        f"<|im_start|>user\n{inp}<|im_end|>\n<|im_start|>assistant\n{base}"
    ),
    "codeqwen": lambda inp, base: (
        f"<|im_start|>user\n{inp}<|im_end|>\n<|im_start|>assistant\n{base}"
    ),
    "codegemma": lambda inp, base: (
        f"<start_of_turn>user\n{inp}<end_of_turn>\n<start_of_turn>model\n{base}"
    ),
    "codellama-70b": lambda inp, base: (
        f"Source: user\n\n {inp.strip()} Source: assistant\nDestination: user \n\n{base}"
    ),
    "aurora-m": lambda inp, base: f"### Instruction:\n{inp}\n### Response:\n{base}",
}


def check_template(template: str) -> None:
    """Raise the error the harness raises (with the valid names) for a rejected template."""
    if template == "continue":
        raise UnknownTemplate(
            "template 'continue' is only for HumanEvalSynthesize (the harness asserts); use "
            f"'instruct' for HumanEvalFix. Valid templates: {', '.join(HARNESS_TEMPLATES)}, chat"
        )
    if template not in HARNESS_TEMPLATES and template != CHAT_TEMPLATE:
        raise UnknownTemplate(
            f"unknown HumanEvalFix template {template!r}. Valid templates: "
            f"{', '.join(HARNESS_TEMPLATES)}, chat"
        )


def build_prompt(problem: Problem, variant: Variant, template: str) -> str:
    """The exact prompt string the harness sends for a harness template (before tokenising)."""
    check_template(template)
    if template == CHAT_TEMPLATE:
        raise UnknownTemplate("the 'chat' template needs a tokenizer: use build_chat_prompt")
    parts = prompt_parts(problem, variant)
    base, instruction, context = parts.prompt_base, parts.instruction, parts.context
    if template == "file":
        prompt = (
            f"<file_name>\n{problem.entry_point}.py\n<commit_before>\n{context}\n"
            f"<commit_msg>\n{instruction}<commit_after>\n{base}"
        )
    elif template == "starcodercommit":
        prompt = f"<commit_before>{context}<commit_msg>{instruction}<commit_after>{base}"
    elif template == "diff":
        prompt = f"<commit_before>{context}<commit_msg>{instruction}<commit_after>"
    elif template == "diff-carper":
        prompt = f"<NME> {problem.entry_point}.py\n<BEF> {context}\n<MSG> {instruction}\n<DFF>"
    elif template == "issue":
        prompt = (
            f"<issue_start>username_0: {instruction}\n\n```{context}```\nUpvotes: 100"
            f"<issue_comment>username_1: Sure, here is the fixed code.\n\n```{base}"
        )
    else:
        # The generic builder strips, then the Fix class strips again (idempotent).
        prompt = _GENERIC[template](model_input(parts, template), base).strip()
    return prompt.strip()


def chat_messages(problem: Problem, variant: Variant) -> list[dict[str, str]]:
    """The same instruction and context as the harness templates, as one user message."""
    parts = prompt_parts(problem, variant)
    return [{"role": "user", "content": model_input(parts, CHAT_TEMPLATE)}]


def build_chat_prompt(rendered_chat: str, problem: Problem, variant: Variant) -> str:
    """`rendered_chat` is the tokenizer's chat template applied to chat_messages() with the
    generation prompt; the prompt base follows it, and the whole string is stripped as the
    harness strips its own templates."""
    return (rendered_chat + prompt_parts(problem, variant).prompt_base).strip()
