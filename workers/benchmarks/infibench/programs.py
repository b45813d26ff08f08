"""The program one unit test runs (spec §4.3), built exactly like `execution_utils.py`.

Pure functions, no execution: code extraction from the response (`preprocess`), the
"function-signature" fallback (`remove_last_block`), the per-language helper header, and the
final file text `program + "\\n" + test`. The result equals the `code` field of the official
per-response details.
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.benchmarks.infibench.criteria import UnitTestItem

# `unit_test.lang` / case `lang` -> executor language; anything else is unsupported.
LANG_ALIASES = {
    "python": "python",
    **{k: "cpp" for k in ("c", "c++", "cpp", "c/c++", "c++/c", "cpp/c", "c/cpp")},
    "js": "javascript",
    "javascript": "javascript",
    "java": "java",
    **{k: "c#" for k in ("c#", "c-sharp", "csharp", "cs")},
    "ts": "typescript",
    "typescript": "typescript",
    "r": "r",
    "go": "go",
}

# Seconds (LANGUAGE_TO_TIMEOUT); a test's own `timeout` overrides them.
DEFAULT_TIMEOUT_S = {
    "python": 10.0,
    "cpp": 60.0,
    "javascript": 10.0,
    "typescript": 20.0,
    "java": 10.0,
    "go": 20.0,
    "c#": 20.0,
    "r": 20.0,
}

PYTHON_HELPER = (
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
    "import pandas as pd",
    "import string",
    "import requests",
    "import openpyxl",
    "import xlsxwriter",
    "import yolk",
    "from typing import *",
    "from collections import *",
)
CPP_HELPER = (
    "using namespace std;",
    "#include<stdlib.h>",
    "#include<algorithm>",
    "#include<cmath>",
    "#include<math.h>",
    "#include<numeric>",
    "#include<stdio.h>",
    "#include<vector>",
    "#include<set>",
    "#include<map>",
    "#include<queue>",
    "#include<stack>",
    "#include<list>",
    "#include<deque>",
    "#include<boost/any.hpp>",
    "#include<string>",
    "#include<climits>",
    "#include<cstring>",
    "#include<iostream>",
    "#include<sstream>",
    "#include<fstream>",
)
R_HELPER = ("rm(list=ls())", "library(assert)")
# The modules the python helper header imports (pre-imported by the python executor).
PYTHON_HELPER_MODULES = (
    "math",
    "re",
    "sys",
    "copy",
    "datetime",
    "itertools",
    "collections",
    "heapq",
    "statistics",
    "functools",
    "hashlib",
    "numpy",
    "pandas",
    "string",
    "requests",
    "openpyxl",
    "xlsxwriter",
    "yolk",
    "typing",
)

STOP_WORDS = {
    "python": ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert"),
    "go": ("\n//", "\nfunc main(", "struct", "\nfunc"),
}
BRACE_LANGS = ("java", "javascript", "go", "cpp", "rust")
FENCE_MARKERS = ("```", "\\begin{code}", "\\end{code}")


class UnsupportedLanguage(ValueError):
    """A unit-test language the official grader does not support (it raises too)."""


@dataclass(frozen=True)
class Program:
    lang: str  # executor language: python | javascript | typescript | cpp | java | go | r | c#
    code: str  # the whole file: helper header + prefix file + extracted code + "\n" + test
    timeout_s: float  # the official per-test timeout


def executor_language(lang: str) -> str:
    """Normalise a case/unit_test `lang` to an executor language (raises if unsupported)."""
    if lang not in LANG_ALIASES:
        raise UnsupportedLanguage(f"Does not support this language yet: {lang}.")
    return LANG_ALIASES[lang]


def remove_last_block(code: str, lang: str) -> str:
    """The "function-signature form": cut a fence-less response after its first block."""
    for word in STOP_WORDS.get(lang, ()):
        if word in code:
            code = code[: code.find(word)]
    if lang == "python":
        lines = code.split("\n")
        for i, line in enumerate(lines):
            if len(line.strip()) > 0 and line[0] != " " and line[0] != "\t":
                return "\n".join(lines[:i])
    elif lang in BRACE_LANGS:
        code = _cut_braces(code, lang)
    return code  # r, c#, typescript: unchanged


def _cut_braces(code: str, lang: str) -> str:
    open_brackets = 2 if lang == "java" else 1
    for i, c in enumerate(code):
        if c == "{":
            open_brackets += 1
        elif c == "}":
            open_brackets -= 1
        if open_brackets == 0:
            return code[: i + 1]
    if lang == "java":
        main_pos = code.find("public static void main")
        if main_pos != -1:
            code = code[:main_pos] + "}"
        if "}" in code:
            code = code[: code.rfind("}")] + "}"
        if code.count("{") - 1 == code.count("}"):
            code += "\n}"
    elif "}" in code:
        code = code[: code.rfind("}")] + "}"
    return code


def extract_code(response: str, lang: str, only_longest: bool) -> str:
    """Code blocks of a response (`preprocess`): any line containing a fence marker is a fence.

    With >= 2 markers in total, fence lines pair up in order (a last unpaired one is ignored);
    all blocks are joined with a blank line, or only the longest is kept (first on ties).
    Otherwise the function-signature form applies.
    """
    n_markers = sum(response.count(marker) for marker in FENCE_MARKERS)
    if n_markers < 2:
        return remove_last_block(response, lang)
    lines = response.split("\n")
    fences = [no for no, text in enumerate(lines) if any(m in text for m in FENCE_MARKERS)]
    pairs = [(fences[i], fences[i + 1]) for i in range(0, len(fences) - 1, 2)]
    if only_longest:
        if len(fences) < 2:
            return ""
        best, best_len = 0, 0
        for i, (start, end) in enumerate(pairs):
            if end - start > best_len:
                best, best_len = i, end - start
        start, end = pairs[best]
        return "\n".join(lines[start + 1 : end])
    return "\n\n".join("\n".join(lines[start + 1 : end]) for start, end in pairs)


def _move_future_imports(code: str) -> str:
    lines = code.split("\n")
    future = [line for line in lines if line.startswith("from __future__")]
    rest = [line for line in lines if not line.startswith("from __future__")]
    return "\n".join(future + rest)


def build_program(lang: str, response: str, item: UnitTestItem) -> Program:
    """The file one unit test runs, for an executor language (see `executor_language`)."""
    # Quirk: the string prefix is added BEFORE extraction, so fences drop it (spec §6.6).
    extracted = extract_code(item.prefix + "\n" + response, lang, item.only_longest)
    program = item.prefix_file + "\n" + extracted
    if lang == "python":
        program = _move_future_imports(("\n".join(PYTHON_HELPER) + "\n" + program).strip())
    elif lang == "cpp":
        program = ("\n".join(CPP_HELPER) + "\n" + program).strip()
    elif lang == "r":
        program = ("\n".join(R_HELPER) + "\n" + program).strip()
    timeout = item.timeout_s if item.timeout_s is not None else DEFAULT_TIMEOUT_S[lang]
    return Program(lang=lang, code=program + "\n" + item.test_code, timeout_s=timeout)
