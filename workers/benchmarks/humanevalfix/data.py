"""Loading the 164 HumanEvalPack Python problems, from a local JSONL or the Hugging Face Hub."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from workers.keys import canonical_json, sha256_hex

HUB_REPO_ID = "bigcode/humanevalpack"
HUB_FILENAME = "data/python/data/humanevalpack.jsonl"
# The dataset repository has no tags; pin a commit when you need bit-for-bit provenance. The
# resolved commit is recorded with the data hash either way.
HUB_DEFAULT_REVISION = "main"

FIELDS = (
    "task_id",
    "prompt",
    "declaration",
    "canonical_solution",
    "buggy_solution",
    "bug_type",
    "failure_symptoms",
    "entry_point",
    "import",
    "test_setup",
    "test",
    "example_test",
    "signature",
    "docstring",
    "instruction",
)


class DatasetError(ValueError):
    """The problem file is missing, malformed or not HumanEvalPack Python."""


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str  # with docstring: the docs variant's prompt base
    declaration: str  # without docstring: the tests variant's prompt base
    buggy_solution: str
    canonical_solution: str
    entry_point: str
    test: str  # ends with the call check(entry_point)
    bug_type: str
    failure_symptoms: str


@dataclass(frozen=True)
class ProblemSet:
    problems: tuple[Problem, ...]
    sha256: str  # sha256 of the canonical JSON of the rows as loaded
    source: str  # where they came from: a path, or "hf://<repo>@<revision>/<file>"


def parse_rows(rows: list[dict], source: str) -> ProblemSet:
    """Validate rows (in file order) and build the ProblemSet; the hash covers all 15 fields."""
    problems = []
    for line_no, row in enumerate(rows, start=1):
        row = dict(row)
        # The HF loading script fills these with "" when absent ("Only for Go").
        row.setdefault("import", "")
        row.setdefault("test_setup", "")
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise DatasetError(f"{source}: row {line_no} lacks field(s) {', '.join(missing)}")
        problems.append(
            Problem(
                task_id=row["task_id"],
                prompt=row["prompt"],
                declaration=row["declaration"],
                buggy_solution=row["buggy_solution"],
                canonical_solution=row["canonical_solution"],
                entry_point=row["entry_point"],
                test=row["test"],
                bug_type=row["bug_type"],
                failure_symptoms=row["failure_symptoms"],
            )
        )
    if not problems:
        raise DatasetError(f"{source}: no problems")
    ids = [p.task_id for p in problems]
    if len(set(ids)) != len(ids):
        raise DatasetError(f"{source}: duplicate task ids")
    digest = sha256_hex(canonical_json([{f: r.get(f, "") for f in FIELDS} for r in rows]))
    return ProblemSet(problems=tuple(problems), sha256=digest, source=source)


def load_jsonl(path: str | Path) -> ProblemSet:
    path = Path(path)
    if not path.is_file():
        raise DatasetError(
            f"HumanEvalPack file not found: {path} (set REPROGRID_DATA_DIR or "
            "benchmark.data_path, or use benchmark.source=hub)"
        )
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DatasetError(f"{path}:{line_no}: invalid JSON ({e.msg})") from e
    return parse_rows(rows, str(path))


def load_hub(revision: str = HUB_DEFAULT_REVISION, cache_dir: str | None = None) -> ProblemSet:
    """Download the raw JSONL from the dataset repository (no loading script is run)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        local = hf_hub_download(
            repo_id=HUB_REPO_ID,
            repo_type="dataset",
            filename=HUB_FILENAME,
            revision=revision,
            cache_dir=cache_dir,
        )
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as e:
        raise DatasetError(
            f"could not fetch {HUB_REPO_ID}/{HUB_FILENAME}@{revision} from the Hub: {e}"
        ) from e
    loaded = load_jsonl(local)
    return ProblemSet(
        loaded.problems, loaded.sha256, f"hf://{HUB_REPO_ID}@{revision}/{HUB_FILENAME}"
    )
