"""Typed, frozen grading criteria of one InfiBench case, parsed from its `grading:` dict.

Parsing keeps exactly the fields the official grader (`grader_main.py` / `grader_utils.py` of
infi-coder/infibench-evaluation-harness @ 736de982) reads, and drops the ones it ignores, so
the scorers never see a field that the official code would not have seen (spec §4, §6):

* keywords: a top-level rule reads `content`, `weight`, `to_lower`, `neg`; a nested node reads
  `content`, `or`, `and`, `regex`, `cond`. A nested `weight`/`to_lower` and a top-level `regex`
  are ignored.
* blank filling: a target whose `content` is a *dict* is iterated like the official loop does,
  so its only accepted answers are the dict's key names (`or`, `content`).

Files that criteria point to (unit tests, prefixes, similarity references, hooks) are resolved
here from the case's dependency files, so a parsed case is self-contained.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_BLANK_STR = "[blank]"
# The official default: space, single quote, double quote, backtick. Newline is NOT in it
# (the schema doc's default with `·` is wrong; spec §4.2).
DEFAULT_BLANK_ESCAPE = " '\"`"
# Keys of `grading:` visited in this order by `grade_response` (spec §3).
METRIC_ORDER = ("keywords", "blank_filling", "unit_test", "similarity", "customized")


class CriteriaError(ValueError):
    """A case's `grading:` dict is malformed (the official grader would fail on it)."""


@dataclass(frozen=True)
class HookRef:
    """A per-question Python hook (`module.func`) and the text of the file that defines it."""

    module: str  # as written in the YAML, e.g. "cases.handler_0-0-1"
    func: str  # function name inside the file
    filename: str  # dependency path of the file, e.g. "handler_0-0-1.py"
    source: str  # the file's text


@dataclass(frozen=True)
class KeywordNode:
    """A nested keyword node: `or` (any), else `and` (all), else the nested `content`."""

    any_of: tuple[KeywordTerm, ...] | None  # `or:` children; wins over `and`
    all_of: tuple[KeywordTerm, ...] | None  # `and:` children
    content: KeywordTerm | None  # nested `content` (used when neither `or` nor `and`)
    regex: bool | None  # None: inherit the parent's regex flag
    cond: str | None  # python expression over `ans` and `context` (see conditions.py)


KeywordTerm = str | KeywordNode


@dataclass(frozen=True)
class KeywordRule:
    content: KeywordTerm
    weight: float = 1.0
    to_lower: bool = False  # lower-cases keyword AND response, regex patterns included
    neg: bool = False  # a match subtracts `weight`; the rule adds nothing to the total


@dataclass(frozen=True)
class KeywordsCriterion:
    rules: tuple[KeywordRule, ...]
    post_handler: HookRef | None = None  # only 0-0-1 in v2.1


@dataclass(frozen=True)
class BlankAlternative:
    text: str
    regex: bool = False  # re.fullmatch (re.search with substr_match)
    cond: str | None = None


@dataclass(frozen=True)
class BlankTarget:
    alternatives: tuple[BlankAlternative, ...]  # the first that matches earns `weight`
    weight: float = 1.0
    to_lower: bool = False
    substr_match: bool = False  # `in` / re.search instead of equality / re.fullmatch


@dataclass(frozen=True)
class BlankFillingCriterion:
    template: str
    targets: tuple[BlankTarget, ...]
    blank_str: str = DEFAULT_BLANK_STR
    escape: str = DEFAULT_BLANK_ESCAPE  # characters stripped from both ends of a blank
    prefix: str = ""  # prepended to the response before alignment
    post_handler: HookRef | None = None  # only 0-0-21 in v2.1


@dataclass(frozen=True)
class UnitTestItem:
    test_code: str  # `path` file text or `content`: appended after the candidate program
    prefix: str = ""  # prepended to the RAW response (lost when the response has fences)
    prefix_file: str = ""  # `prefix_path` file text, prepended after code extraction
    cleanup_code: str = ""  # `cleanup_path` text; irrelevant here (every run gets a fresh dir)
    weight: float = 1.0
    timeout_s: float | None = None  # None: the language default
    only_longest: bool = False  # keep only the longest fenced block


@dataclass(frozen=True)
class UnitTestCriterion:
    lang: str  # `unit_test.lang` if set, else the case `lang`, as written (normalised later)
    tests: tuple[UnitTestItem, ...]


@dataclass(frozen=True)
class SimilarityMetric:
    metric: str  # rouge1 | rouge2 | rougeL | rougeLsum
    references: tuple[str, ...]
    min_score: float
    max_score: float
    weight: float = 1.0


@dataclass(frozen=True)
class CustomizedCriterion:
    hook: HookRef
    real_metric_type: str  # the metric breakdown it counts under ("keywords" for all of v2.1)


@dataclass(frozen=True)
class Criteria:
    keys: tuple[str, ...]  # the raw `grading:` keys, in file order (they pick the system prompt)
    keywords: KeywordsCriterion | None = None
    blank_filling: BlankFillingCriterion | None = None
    unit_test: UnitTestCriterion | None = None
    similarity: tuple[SimilarityMetric, ...] | None = None
    customized: CustomizedCriterion | None = None
    max_score: float | None = None  # total := max_score, earned := min(earned, max_score)
    min_score: float | None = None  # earned := max(earned, min_score)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metric keys present, in the official visiting order."""
        return tuple(m for m in METRIC_ORDER if getattr(self, m) is not None)


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_criteria(grading: Any, lang: str, dependencies: Mapping[str, str]) -> Criteria:
    """Parse a case's `grading:` dict; `dependencies` maps relative file paths to their text."""
    if not isinstance(grading, dict):
        raise CriteriaError(f"`grading` must be a mapping, got {type(grading).__name__}")
    deps = _Deps(dependencies)
    return Criteria(
        keys=tuple(str(k) for k in grading),
        keywords=_keywords(grading["keywords"], deps) if "keywords" in grading else None,
        blank_filling=(
            _blank_filling(grading["blank_filling"], deps) if "blank_filling" in grading else None
        ),
        unit_test=_unit_test(grading["unit_test"], lang, deps) if "unit_test" in grading else None,
        similarity=_similarity(grading["similarity"], deps) if "similarity" in grading else None,
        customized=_customized(grading["customized"], deps) if "customized" in grading else None,
        max_score=_opt_float(grading, "max_score"),
        min_score=_opt_float(grading, "min_score"),
    )


class _Deps:
    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = files

    def read(self, path: Any, what: str) -> str:
        if not isinstance(path, str):
            raise CriteriaError(f"{what}: path must be a string, got {path!r}")
        key = path[2:] if path.startswith("./") else path
        if key not in self.files:
            raise CriteriaError(f"{what}: dependency file {path!r} not found")
        return self.files[key]

    def hook(self, spec: Any, what: str) -> HookRef:
        if not isinstance(spec, dict) or "module" not in spec or "func" not in spec:
            raise CriteriaError(f"{what}: a hook needs `module` and `func`, got {spec!r}")
        module, func = str(spec["module"]), str(spec["func"])
        # The grader imports `cases.handler_X` from its working directory, i.e. the file
        # handler_X.py next to the case YAML.
        filename = module.rsplit(".", 1)[-1] + ".py"
        return HookRef(module, func, filename, source=self.read(filename, what))


def _opt_float(d: dict, key: str) -> float | None:
    if key not in d:
        return None
    try:
        return float(d[key])
    except (TypeError, ValueError) as e:
        raise CriteriaError(f"`{key}` must be a number, got {d[key]!r}") from e


def _keyword_term(node: Any, where: str) -> KeywordTerm:
    if isinstance(node, str):
        return node
    if not isinstance(node, dict):
        raise CriteriaError(f"{where}: a keyword node must be a string or a mapping, got {node!r}")
    any_of = all_of = content = None
    if "or" in node:
        any_of = tuple(_keyword_term(c, f"{where}.or") for c in _as_list(node["or"], where))
    elif "and" in node:
        all_of = tuple(_keyword_term(c, f"{where}.and") for c in _as_list(node["and"], where))
    elif "content" in node:
        content = _keyword_term(node["content"], f"{where}.content")
    else:
        raise CriteriaError(f"{where}: a keyword node needs `or`, `and` or `content`: {node!r}")
    cond = node.get("cond")
    return KeywordNode(
        any_of=any_of,
        all_of=all_of,
        content=content,
        regex=bool(node["regex"]) if "regex" in node else None,
        cond=None if cond is None else str(cond),
    )


def _as_list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise CriteriaError(f"{where}: expected a list, got {value!r}")
    return value


def _keywords(rules: Any, deps: _Deps) -> KeywordsCriterion:
    parsed: list[KeywordRule] = []
    post_handler = None
    for i, rule in enumerate(_as_list(rules, "keywords")):
        where = f"keywords[{i}]"
        if isinstance(rule, str):
            parsed.append(KeywordRule(content=rule))
            continue
        if not isinstance(rule, dict):
            raise CriteriaError(f"{where}: a rule must be a string or a mapping, got {rule!r}")
        if "post_handler" in rule:  # registers the hook; not a rule (the last one wins)
            post_handler = deps.hook(rule["post_handler"], f"{where}.post_handler")
            continue
        if "content" not in rule:
            raise CriteriaError(f"{where}: a rule needs `content`: {rule!r}")
        parsed.append(
            KeywordRule(
                content=_keyword_term(rule["content"], f"{where}.content"),
                weight=float(rule.get("weight", 1.0)),
                to_lower=bool(rule.get("to_lower", False)),
                neg=bool(rule.get("neg", False)),
            )
        )
    return KeywordsCriterion(rules=tuple(parsed), post_handler=post_handler)


def _blank_alternatives(content: Any, where: str) -> tuple[BlankAlternative, ...]:
    if isinstance(content, str):
        return (BlankAlternative(content),)
    if isinstance(content, dict):
        # Quirk (spec §4.2): the official loop iterates over the dict, i.e. over its KEYS, so
        # the only accepted answer is the literal key name ("or" / "content").
        return tuple(BlankAlternative(str(key)) for key in content)
    alternatives = []
    for j, alt in enumerate(_as_list(content, where)):
        if isinstance(alt, str):
            alternatives.append(BlankAlternative(alt))
        elif isinstance(alt, dict) and isinstance(alt.get("content"), str):
            cond = alt.get("cond")
            alternatives.append(
                BlankAlternative(
                    alt["content"],
                    regex=bool(alt.get("regex", False)),
                    cond=None if cond is None else str(cond),
                )
            )
        else:
            raise CriteriaError(f"{where}[{j}]: an answer must be a string or {{content: str}}")
    return tuple(alternatives)


def _blank_filling(spec: Any, deps: _Deps) -> BlankFillingCriterion:
    if not isinstance(spec, dict) or "template" not in spec or "targets" not in spec:
        raise CriteriaError("blank_filling needs `template` and `targets`")
    targets = []
    for i, target in enumerate(_as_list(spec["targets"], "blank_filling.targets")):
        where = f"blank_filling.targets[{i}]"
        if isinstance(target, str):
            targets.append(BlankTarget((BlankAlternative(target),)))
        elif isinstance(target, dict) and "content" in target:
            targets.append(
                BlankTarget(
                    alternatives=_blank_alternatives(target["content"], where),
                    weight=float(target.get("weight", 1.0)),
                    to_lower=bool(target.get("to_lower", False)),
                    substr_match=bool(target.get("substr_match", False)),
                )
            )
        else:
            raise CriteriaError(f"{where}: a target must be a string or have `content`")
    template = str(spec["template"])
    blank_str = str(spec.get("blank_str", DEFAULT_BLANK_STR))
    n_blanks = sum(1 for i in range(len(template)) if template.startswith(blank_str, i))
    if n_blanks != len(targets) or template.count(blank_str) != n_blanks:
        raise CriteriaError(
            f"blank_filling: {n_blanks} blanks ({blank_str!r}) but {len(targets)} targets"
        )
    post = spec.get("post_handler")
    return BlankFillingCriterion(
        template=template,
        targets=tuple(targets),
        blank_str=blank_str,
        escape=str(spec.get("escape", DEFAULT_BLANK_ESCAPE)),
        prefix=str(spec.get("prefix", "")),
        post_handler=None if post is None else deps.hook(post, "blank_filling.post_handler"),
    )


def _unit_test(spec: Any, case_lang: str, deps: _Deps) -> UnitTestCriterion:
    if not isinstance(spec, dict) or "tests" not in spec:
        raise CriteriaError("unit_test needs `tests`")
    items = []
    for i, test in enumerate(_as_list(spec["tests"], "unit_test.tests")):
        where = f"unit_test.tests[{i}]"
        if isinstance(test, str):
            items.append(UnitTestItem(test_code=test))
            continue
        if not isinstance(test, dict) or not ("path" in test or "content" in test):
            raise CriteriaError(f"{where}: a test needs `path` or `content`")
        code = deps.read(test["path"], where) if "path" in test else str(test["content"])
        timeout = test.get("timeout")
        items.append(
            UnitTestItem(
                test_code=code,
                prefix=str(test.get("prefix", "")),
                prefix_file=(
                    deps.read(test["prefix_path"], where) if test.get("prefix_path") else ""
                ),
                cleanup_code=(
                    deps.read(test["cleanup_path"], where) if "cleanup_path" in test else ""
                ),
                weight=float(test.get("weight", 1.0)),
                timeout_s=None if timeout is None else float(timeout),
                only_longest=bool(test.get("only_longest", False)),
            )
        )
    return UnitTestCriterion(lang=str(spec.get("lang", case_lang)), tests=tuple(items))


# Defaults of the normalisation bounds (spec §4.4): rouge1 max 0.53, every other metric 0.51.
SIMILARITY_DEFAULT_MIN = 0.3
SIMILARITY_DEFAULT_MAX = {"rouge1": 0.53}
SIMILARITY_DEFAULT_MAX_OTHER = 0.51
ROUGE_METRICS = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def _similarity(spec: Any, deps: _Deps) -> tuple[SimilarityMetric, ...]:
    metrics = []
    for i, item in enumerate(_as_list(spec, "similarity")):
        where = f"similarity[{i}]"
        if not isinstance(item, dict) or item.get("metric") not in ROUGE_METRICS:
            raise CriteriaError(f"{where}: `metric` must be one of {', '.join(ROUGE_METRICS)}")
        refs = []
        for ref in _as_list(item.get("references"), f"{where}.references"):
            refs.append(ref if isinstance(ref, str) else deps.read(ref.get("path"), where))
        metric = item["metric"]
        default_max = SIMILARITY_DEFAULT_MAX.get(metric, SIMILARITY_DEFAULT_MAX_OTHER)
        metrics.append(
            SimilarityMetric(
                metric=metric,
                references=tuple(refs),
                min_score=float(item.get("min_score", SIMILARITY_DEFAULT_MIN)),
                max_score=float(item.get("max_score", default_max)),
                weight=float(item.get("weight", 1.0)),
            )
        )
    return tuple(metrics)


def _customized(spec: Any, deps: _Deps) -> CustomizedCriterion:
    if not isinstance(spec, dict):
        raise CriteriaError("customized must be a mapping")
    return CustomizedCriterion(
        hook=deps.hook(spec, "customized"),
        # print_result_stat.py falls back to the field name "custom".
        real_metric_type=str(spec.get("real_metric_type", "custom")),
    )
