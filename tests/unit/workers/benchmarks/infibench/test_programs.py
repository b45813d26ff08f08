"""Unit-test program building: code extraction, helper headers, prefixes (spec §4.3, §6.6-6.7)."""

from __future__ import annotations

import pytest

from workers.benchmarks.infibench.criteria import UnitTestItem
from workers.benchmarks.infibench.programs import (
    CPP_HELPER,
    PYTHON_HELPER,
    R_HELPER,
    UnsupportedLanguage,
    build_program,
    executor_language,
    extract_code,
    remove_last_block,
)

TWO_BLOCKS = "Intro\n```python\na = 1\n```\nThen\n```\nb = 2\nc = 3\n```\nBye"


@pytest.mark.parametrize(
    ("response", "only_longest", "expected"),
    [
        (TWO_BLOCKS, False, "a = 1\n\nb = 2\nc = 3"),  # every block, joined by a blank line
        (TWO_BLOCKS, True, "b = 2\nc = 3"),  # the block with most lines
        ("```\nx\n```\n```\ny\n```", True, "x"),  # a tie keeps the first
        # any line CONTAINING a marker is a fence line
        ("see ```this``` inline\ncode\nend ``` here", False, "code"),
        # an odd fence count drops the last unpaired fence
        ("```\na\n```\ntext\n```\nb", False, "a"),
        ("\\begin{code}\nq = 1\n\\end{code}", False, "q = 1"),
        ("one line with ```x``` only", True, ""),  # 2 markers on 1 line: no pair
    ],
)
def test_extract_fenced(response, only_longest, expected):
    assert extract_code(response, "python", only_longest) == expected


@pytest.mark.parametrize(
    ("code", "lang", "expected"),
    [
        # python: cut at the first stop word, then before the first non-indented line
        ("    return x\n\ndef g():\n    pass", "python", "    return x\n"),
        ("def f():\n    return 1\nprint(f())", "python", ""),
        ("    y = 1\nz = 2", "python", "    y = 1"),
        # brace languages: stop when the braces opened so far close (one already open)
        ("  return 1;\n}\nconsole.log(f())", "javascript", "  return 1;\n}"),
        ("  return 1;\n} }", "cpp", "  return 1;\n}"),
        ("a { b }\n}\n}\nmore", "java", "a { b }\n}\n}"),  # java starts with 2 open
        ("  x := 1\n}\n// comment", "go", "  x := 1\n}"),  # go stop words first
        ("  x := 1\nfunc main() {}", "go", "  x := 1"),
        ("anything { at all", "r", "anything { at all"),  # r, ts, c#: unchanged
        ("let a: number = 1", "typescript", "let a: number = 1"),
    ],
)
def test_function_signature_form(code, lang, expected):
    assert remove_last_block(code, lang) == expected


def test_python_program_header_strip_and_future_imports():
    response = "```python\nfrom __future__ import annotations\ndef f(): return 1\n```"
    program = build_program("python", response, UnitTestItem(test_code="assert f() == 1"))
    lines = program.code.split("\n")
    assert lines[0] == "from __future__ import annotations"
    assert lines[1 : 1 + len(PYTHON_HELPER)] == list(PYTHON_HELPER)
    assert program.code.endswith("def f(): return 1\nassert f() == 1")
    assert program.timeout_s == 10.0


def test_string_prefix_survives_only_without_fences():
    item = UnitTestItem(test_code="T", prefix="my_set = [1]", only_longest=True)
    fenced = build_program("python", "```\nprint(1)\n```", item)
    plain = build_program("python", "    pass", item)
    assert "my_set" not in fenced.code  # 1-3-224: lost when the response has fences
    assert "my_set = [1]" not in plain.code  # ... and cut by the signature form here too
    body = build_program("r", "x <- 1", UnitTestItem(test_code="T", prefix="p <- 0"))
    assert "p <- 0\nx <- 1" in body.code


def test_prefix_file_always_kept_and_headers():
    item = UnitTestItem(test_code="TEST", prefix_file="PREFIX", timeout_s=30.0)
    js = build_program("javascript", "```js\nf()\n```", item)
    assert js.code == "PREFIX\nf()\nTEST" and js.timeout_s == 30.0
    cpp = build_program("cpp", "```cpp\nint f();\n```", UnitTestItem(test_code="T"))
    assert cpp.code == "\n".join(CPP_HELPER) + "\n\nint f();\nT"
    assert cpp.timeout_s == 60.0
    r = build_program("r", "```r\nf <- 1\n```", UnitTestItem(test_code="T"))
    assert r.code.startswith("\n".join(R_HELPER)) and r.timeout_s == 20.0


@pytest.mark.parametrize(
    ("lang", "expected"),
    [
        ("python", "python"),
        ("c++/c", "cpp"),
        ("c", "cpp"),
        ("js", "javascript"),
        ("ts", "typescript"),
        ("cs", "c#"),
        ("java", "java"),
        ("go", "go"),
        ("r", "r"),
    ],
)
def test_language_normalisation(lang, expected):
    assert executor_language(lang) == expected


@pytest.mark.parametrize("lang", ["rust", "html", "dart", "Python"])
def test_unsupported_languages(lang):
    with pytest.raises(UnsupportedLanguage):
        executor_language(lang)
