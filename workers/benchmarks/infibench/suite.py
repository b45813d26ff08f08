"""Loading an InfiBench suite: cases, their criteria, prompts and dependency files.

Two equivalent encodings are read (spec §1), and both give the same `Suite.sha256`:

* a folder laid out like the official `bigcode_eval/infibench/` (a suite YAML listing
  `cases/eval_<id>.yaml`, each with its `prompt_<id>.txt` and the files its criteria point to),
  e.g. suite v2.1 (`suite_v2.1.yaml`) or the v2.0.0 dev suite
  (`official_results/dev_v2.0.0/suite_v2.0.0_dev.yaml`);
* the packed CSV the official grader reads in `--batched` mode (`batched_cases/*.csv`: columns
  `case_path`, `prompt`, `eval_spec`, `dependencies`).

Case YAML is parsed with PyYAML's safe loader, like the batched grader: a duplicated key keeps
the last value (0-0-8 has two `grading:` keys; a strict parser would reject the file).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from workers.benchmarks.infibench.criteria import Criteria, CriteriaError, parse_criteria
from workers.keys import canonical_json, sha256_hex

V21_SUITE_FILE = "suite_v2.1.yaml"
DEV_SUITE_DIR = "official_results/dev_v2.0.0"
DEV_SUITE_FILE = "suite_v2.0.0_dev.yaml"

DEFAULT_REDUCE_MODE = "avg_max_10"  # what suite v2.1 declares (the grader's own default is avg)
DEFAULT_FULL_SCORE = 1.0
DEFAULT_NULL_SCORE = 0.0


class SuiteError(ValueError):
    """A suite or one of its cases cannot be loaded."""


@dataclass(frozen=True)
class Case:
    case_path: str  # as listed in the suite ("cases/eval_0-0-0.yaml"); responses name it
    case_id: str  # the YAML `id`, e.g. "0-0-0"
    prompt: str  # the question text (the user turn), unchanged
    type: str  # "code completion" | "code debugging" | "knowledge question-answering" | ...
    lang: str  # the case `lang` label (14 in v2.1), e.g. "c++/c"
    full_score: float  # the case's weight in the total (1.0 everywhere in v2.1)
    null_score: float  # the score of a case without any response
    criteria: Criteria
    eval_spec: str  # the raw case YAML text
    dependencies: Mapping[str, str]  # relative path -> text, every file the criteria read


@dataclass(frozen=True)
class Suite:
    name: str  # the suite's `version` field, e.g. "suite_v2.1.yaml"
    cases: tuple[Case, ...]
    attempt_reduce_mode: str  # "avg_max_10": best of each consecutive group of 10 samples
    full_score_per_question: float
    null_score_per_question: float
    sha256: str  # canonical JSON of settings + (case_path, prompt, eval_spec, dependencies)
    source: str  # where it was loaded from

    def case(self, key: str) -> Case:
        """The case with this case_path or id."""
        for case in self.cases:
            if key in (case.case_path, case.case_id):
                return case
        raise KeyError(f"no case {key!r} in suite {self.name}")


class _RecordingFiles(Mapping[str, str]):
    """Files of one case, recording which ones the criteria actually read."""

    def __init__(self, read_one, exists) -> None:
        self._read_one, self._exists = read_one, exists
        self.read: dict[str, str] = {}

    def __getitem__(self, key: str) -> str:
        if key not in self.read:
            if not self._exists(key):
                raise KeyError(key)
            self.read[key] = self._read_one(key)
        return self.read[key]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in self.read or self._exists(key))

    def __iter__(self) -> Iterator[str]:
        return iter(self.read)

    def __len__(self) -> int:
        return len(self.read)


def _folder_files(case_dir: Path) -> _RecordingFiles:
    root = case_dir.resolve()

    def resolve(key: str) -> Path | None:
        path = (root / key).resolve()
        return path if path.is_relative_to(root) and path.is_file() else None

    return _RecordingFiles(
        read_one=lambda key: resolve(key).read_text(encoding="utf-8"),  # type: ignore[union-attr]
        exists=lambda key: resolve(key) is not None,
    )


def _dict_files(files: Mapping[str, str]) -> _RecordingFiles:
    return _RecordingFiles(read_one=files.__getitem__, exists=files.__contains__)


def parse_case(
    case_path: str,
    eval_spec: str,
    prompt: str,
    files: Mapping[str, str],
    suite_full: float = DEFAULT_FULL_SCORE,
    suite_null: float = DEFAULT_NULL_SCORE,
) -> Case:
    """Build one Case from its raw YAML text, question text and files (relative path -> text)."""
    try:
        config = yaml.safe_load(eval_spec)
    except yaml.YAMLError as e:
        raise SuiteError(f"{case_path}: invalid YAML ({e})") from e
    if not isinstance(config, dict) or "grading" not in config:
        raise SuiteError(f"{case_path}: a case needs a `grading:` mapping")
    recorder = files if isinstance(files, _RecordingFiles) else _dict_files(files)
    lang = str(config.get("lang", ""))
    try:
        criteria = parse_criteria(config["grading"], lang, recorder)
    except (CriteriaError, KeyError, TypeError, ValueError) as e:
        raise SuiteError(f"{case_path}: {e}") from e
    return Case(
        case_path=case_path,
        case_id=str(config.get("id", Path(case_path).stem.removeprefix("eval_"))),
        prompt=prompt,
        type=str(config.get("type", "")),
        lang=lang,
        full_score=float(config.get("full_score", suite_full)),
        null_score=float(config.get("null_score", suite_null)),
        criteria=criteria,
        eval_spec=eval_spec,
        dependencies=dict(sorted(recorder.read.items())),
    )


def _suite_settings(defs: Mapping[str, Any]) -> tuple[str, float, float]:
    return (
        str(defs.get("attempt_reduce_mode", DEFAULT_REDUCE_MODE)),
        float(defs.get("full_score_per_question", DEFAULT_FULL_SCORE)),
        float(defs.get("null_score_per_question", DEFAULT_NULL_SCORE)),
    )


def _case_list(defs: Mapping[str, Any], source: str) -> list[str]:
    cases = defs.get("cases")
    if not isinstance(cases, list) or not cases:
        raise SuiteError(f"{source}: the suite lists no `cases`")
    # A case may be written as {path, weight}; the grader never uses the weight.
    return [c if isinstance(c, str) else str(c["path"]) for c in cases]


def _build(name: str, cases: list[Case], settings: tuple[str, float, float], source: str) -> Suite:
    paths = [c.case_path for c in cases]
    if len(set(paths)) != len(paths):
        raise SuiteError(f"{source}: duplicate case paths")
    reduce_mode, full, null = settings
    digest = sha256_hex(
        canonical_json(
            {
                "attempt_reduce_mode": reduce_mode,
                "full_score_per_question": full,
                "null_score_per_question": null,
                "cases": [
                    {
                        "case_path": c.case_path,
                        "prompt": c.prompt,
                        "eval_spec": c.eval_spec,
                        "dependencies": dict(c.dependencies),
                    }
                    for c in cases
                ],
            }
        )
    )
    return Suite(name, tuple(cases), reduce_mode, full, null, digest, source)


def suite_from_cases(
    cases: list[Case],
    name: str = "custom",
    attempt_reduce_mode: str = DEFAULT_REDUCE_MODE,
    full_score_per_question: float = DEFAULT_FULL_SCORE,
    null_score_per_question: float = DEFAULT_NULL_SCORE,
) -> Suite:
    """A suite made of already parsed cases (see `parse_case`), e.g. a subset or a test suite."""
    settings = (attempt_reduce_mode, full_score_per_question, null_score_per_question)
    return _build(name, list(cases), settings, name)


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise SuiteError(f"suite file not found: {path} (set REPROGRID_DATA_DIR?)")
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def load_suite(folder: str | Path, suite_file: str = V21_SUITE_FILE) -> Suite:
    """Load a suite from a folder laid out like the official one (v2.1 by default)."""
    folder = Path(folder)
    defs = _read_yaml(folder / suite_file)
    settings = _suite_settings(defs)
    cases = []
    for case_path in _case_list(defs, str(folder / suite_file)):
        full_path = folder / case_path
        if not full_path.is_file():
            raise SuiteError(f"case file not found: {full_path}")
        eval_spec = full_path.read_text(encoding="utf-8")
        config = yaml.safe_load(eval_spec)
        prompt_path = full_path.parent / str((config or {}).get("prompt_path", ""))
        if not prompt_path.is_file():
            raise SuiteError(f"{case_path}: prompt file not found: {prompt_path}")
        cases.append(
            parse_case(
                case_path,
                eval_spec,
                prompt_path.read_text(encoding="utf-8"),
                _folder_files(full_path.parent),
                settings[1],
                settings[2],
            )
        )
    return _build(str(defs.get("version", suite_file)), cases, settings, str(folder / suite_file))


def load_packed_suite(csv_path: str | Path, suite_yaml: str | Path | None = None) -> Suite:
    """Load the packed CSV of the batched grader (`batched_cases/*.csv`).

    `suite_yaml` (optional) gives the suite settings and the case order; without it the CSV
    order and suite v2.1's settings (avg_max_10, full score 1.0) are used.
    """
    import pandas as pd  # only this loader needs it

    csv_path = Path(csv_path)
    if not csv_path.is_file():
        raise SuiteError(f"packed suite not found: {csv_path} (set REPROGRID_DATA_DIR?)")
    frame = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    missing = {"case_path", "prompt", "eval_spec", "dependencies"} - set(frame.columns)
    if missing:
        raise SuiteError(f"{csv_path}: missing column(s) {', '.join(sorted(missing))}")
    rows = {r.case_path: r for r in frame.itertuples(index=False)}
    if suite_yaml is not None:
        defs = _read_yaml(Path(suite_yaml))
        order, settings = _case_list(defs, str(suite_yaml)), _suite_settings(defs)
        name = str(defs.get("version", Path(suite_yaml).name))
    else:
        order, settings = list(frame["case_path"]), _suite_settings({})
        name = csv_path.name
    cases = []
    for case_path in order:
        if case_path not in rows:
            raise SuiteError(f"{csv_path}: no row for case {case_path}")
        row = rows[case_path]
        try:
            deps = json.loads(row.dependencies) if row.dependencies else {}
        except json.JSONDecodeError as e:
            raise SuiteError(f"{case_path}: invalid dependencies JSON ({e.msg})") from e
        cases.append(
            parse_case(case_path, row.eval_spec, row.prompt, deps, settings[1], settings[2])
        )
    return _build(name, cases, settings, str(csv_path))


def load_dev_suite(infibench_dir: str | Path) -> Suite:
    """The 135-question v2.0.0 dev suite that ships with official GPT-3.5 responses."""
    return load_suite(Path(infibench_dir) / DEV_SUITE_DIR, DEV_SUITE_FILE)
