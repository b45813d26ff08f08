"""The literature table: benchmark scores as papers print them, loaded from CSV and validated.

One row per reported score. The score is kept as the text the paper printed (`score_text`),
because the number of decimals it was printed with decides which k/n values could have produced
it (orchestrator/literature.py); a float would lose "14.0" vs "14".

Columns (all required; extra columns are ignored):

| column | meaning |
| --- | --- |
| model | the model name as the source prints it (the key of the name mapping) |
| model_family | normalised family, e.g. "DeepSeekCoder" |
| size_b | parameters in billions as printed ("6.7", "8x7", or empty when unknown) |
| tuning | base or instruct |
| score_pct | the reported pass@1 in percent, as printed (e.g. "44.9") |
| source_id | e.g. "arXiv:2405.04324" or "doi:..." |
| source_title | the paper's title |
| table_or_location | where in the source the value is printed |
| setting_notes | what the source says about the setting (decoding, prompt, ...) |
| found_via | primary-source or review-text |
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path

import yaml

COLUMNS = (
    "model",
    "model_family",
    "size_b",
    "tuning",
    "score_pct",
    "source_id",
    "source_title",
    "table_or_location",
    "setting_notes",
    "found_via",
)
# Optional columns: a user's CSV may leave them out (they are then blank for every row).
OPTIONAL_COLUMNS = ("n_samples",)
TUNINGS = ("base", "instruct")
DEFAULT_FILE = "humanevalfix-python.csv"  # shipped in storage/data/
DEFAULT_MAPPING_FILE = "humanevalfix-mapping.yaml"  # shipped in storage/data/
HUMANEVALFIX_PROBLEMS = 164

_SCORE = re.compile(r"^\d{1,3}(\.\d+)?$")
_SIZE = re.compile(r"^(\d+(\.\d+)?(x\d+(\.\d+)?)?)?$")


class LiteratureError(ValueError):
    """A literature CSV that cannot be used; names the file, line, column and bad value."""

    def __init__(
        self, source: str, line: int | None, column: str | None, value: str | None, problem: str
    ):
        self.source, self.line, self.column, self.value = source, line, column, value
        where = source if line is None else f"{source}:{line}"
        what = "" if column is None else f" column {column!r}"
        bad = "" if value is None else f" value {value!r}"
        super().__init__(f"{where}:{what}{bad}: {problem}")


@dataclass(frozen=True)
class LiteratureRow:
    line: int  # line of the CSV file where the record starts (the header is line 1)
    model: str
    model_family: str
    size_b: str  # as printed; "" when unknown
    tuning: str  # "base" | "instruct"
    score_text: str  # the reported percentage exactly as printed, e.g. "44.9"
    source_id: str
    source_title: str
    table_or_location: str
    setting_notes: str
    found_via: str
    n_samples: int | None = None  # samples per problem behind the value, where the source says

    @property
    def score_pct(self) -> float:
        return float(self.score_text)

    @property
    def decimals(self) -> int:
        """Decimals as printed: "44.9" -> 1, "14.0" -> 1, "47" -> 0."""
        return len(self.score_text.partition(".")[2])


def _validate(values: dict[str, str], source: str, line: int) -> LiteratureRow:
    if not values["model"]:
        raise LiteratureError(source, line, "model", values["model"], "must not be empty")
    tuning = values["tuning"]
    if tuning not in TUNINGS:
        raise LiteratureError(
            source, line, "tuning", tuning, f"must be one of {', '.join(TUNINGS)}"
        )
    score = values["score_pct"]
    if not _SCORE.match(score) or Decimal(score) > 100:
        raise LiteratureError(
            source,
            line,
            "score_pct",
            score,
            "must be a percentage between 0 and 100 as printed, e.g. 44.9 (no % sign)",
        )
    if not _SIZE.match(values["size_b"]):
        raise LiteratureError(
            source,
            line,
            "size_b",
            values["size_b"],
            "must be billions of parameters (e.g. 6.7, 8x7) or empty",
        )
    if not values["source_id"]:
        raise LiteratureError(source, line, "source_id", "", "must name the source")
    samples = values.get("n_samples", "")
    if samples and not (samples.isdigit() and int(samples) >= 1):
        raise LiteratureError(
            source,
            line,
            "n_samples",
            samples,
            "must be a positive integer (samples per problem), or empty when unknown",
        )
    return LiteratureRow(
        line=line,
        model=values["model"],
        model_family=values["model_family"],
        size_b=values["size_b"],
        tuning=tuning,
        score_text=score,
        source_id=values["source_id"],
        source_title=values["source_title"],
        table_or_location=values["table_or_location"],
        setting_notes=values["setting_notes"],
        found_via=values["found_via"],
        n_samples=int(samples) if samples else None,
    )


def parse_literature(text: str, source: str = "<literature>") -> list[LiteratureRow]:
    """Parse and validate CSV text; raises LiteratureError at the first bad value."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise LiteratureError(source, 1, None, None, "empty file (expected a header)") from None
    header = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise LiteratureError(
            source,
            1,
            None,
            None,
            f"header lacks column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}",
        )
    index = {c: header.index(c) for c in (*COLUMNS, *OPTIONAL_COLUMNS) if c in header}
    rows = []
    start = reader.line_num + 1
    try:
        for record in reader:
            line = start
            start = reader.line_num + 1
            if not record or all(not cell.strip() for cell in record):
                continue
            if len(record) != len(header):
                raise LiteratureError(
                    source,
                    line,
                    None,
                    None,
                    f"has {len(record)} fields, the header has {len(header)}",
                )
            values = {c: record[i].strip() for c, i in index.items()}
            rows.append(_validate(values, source, line))
    except csv.Error as e:
        raise LiteratureError(source, start, None, None, f"malformed CSV ({e})") from e
    if not rows:
        raise LiteratureError(source, None, None, None, "no literature rows")
    return rows


def load_literature(path: str | Path) -> list[LiteratureRow]:
    """Read a literature CSV (UTF-8) from a path."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise LiteratureError(str(path), None, None, None, "file not found") from None
    except UnicodeDecodeError as e:
        raise LiteratureError(str(path), None, None, None, f"not UTF-8 ({e})") from e
    return parse_literature(text, str(path))


def load_default_literature() -> list[LiteratureRow]:
    """The HumanEvalFix-Python values shipped with reprogrid (storage/data/)."""
    resource = resources.files("storage").joinpath("data", DEFAULT_FILE)
    return parse_literature(resource.read_text(encoding="utf-8"), f"reprogrid:{DEFAULT_FILE}")


# ---------------------------------------------------------------------------------------------
# The name mapping (storage/data/humanevalfix-mapping.yaml, or a user's file)


@dataclass(frozen=True)
class LiteratureMapping:
    models: dict[str, str]  # literature model name (as printed) -> configured model name
    benchmark: str = "humanevalfix"  # store settings of this benchmark are compared
    variants: tuple[str, ...] = ("tests",)  # ... and of these variants
    n_problems: int = HUMANEVALFIX_PROBLEMS  # problems of the benchmark (obtainability: k/n)
    source: str = ""  # the file's name


def load_literature_mapping(path: str | Path) -> LiteratureMapping:
    """Read and check a mapping YAML file (see `parse_literature_mapping`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LiteratureError(str(path), None, None, None, "mapping file not found") from None
    return parse_literature_mapping(text, path.name)


def load_default_mapping() -> LiteratureMapping:
    """The shipped mapping (storage/data/humanevalfix-mapping.yaml)."""
    resource = resources.files("storage").joinpath("data", DEFAULT_MAPPING_FILE)
    return parse_literature_mapping(
        resource.read_text(encoding="utf-8"), f"reprogrid:{DEFAULT_MAPPING_FILE}"
    )


def parse_literature_mapping(text: str, source: str) -> LiteratureMapping:
    """Check a mapping YAML: `models` maps names to model names; `benchmark`, `variants` and
    `n_problems` are optional. Raises LiteratureError."""
    path = source
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise LiteratureError(str(path), None, None, None, f"invalid YAML ({e})") from e
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict) or not all(isinstance(v, str) for v in models.values()):
        raise LiteratureError(
            str(path), None, "models", None, "must map literature names to model names"
        )
    try:
        n_problems = int(data.get("n_problems", HUMANEVALFIX_PROBLEMS))
    except (TypeError, ValueError):
        raise LiteratureError(
            str(path), None, "n_problems", str(data.get("n_problems")), "must be an integer"
        ) from None
    return LiteratureMapping(
        models={str(k): v for k, v in models.items()},
        benchmark=str(data.get("benchmark", "humanevalfix")),
        variants=tuple(str(v) for v in data.get("variants", ["tests"])),
        n_problems=n_problems,
        source=source,
    )
