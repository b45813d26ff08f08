"""The literature table: benchmark scores as their sources print them, loaded and validated.

One row per reported score. The score is kept as the text the source printed (`score_text`),
because for a pass@1 the number of decimals it was printed with decides which k/n values could
have produced it (orchestrator/analysis/obtainability.py); a float would lose "14.0" vs "14".

Which file a benchmark's values come from, in which format, and how they are matched is the
benchmark's card (workers/card.py). A location is `reprogrid:<file>` (shipped in storage/data/)
or `data:<path>` (under the data folder); `read_location` resolves both. Two formats:

**papers** (`load_literature`, `parse_literature`): one row per value a paper reports. Columns
(all required; extra columns are ignored):

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

`n_samples` (samples per problem behind the value, where the source states it) is optional.

**leaderboard** (`parse_leaderboard`): a leaderboard table, one row per model: `model`,
`score_pct`, `std_pct` (the std over repeated runs, percentage points), `num_responses`
(samples per problem) required; `family`, `params` ("6.7B", "46.7B / 12.9B", "?"),
`model_type` (Base / Finetuned), `gen_params_temp_topp` ("(0.2,0.9)" or "greedy"), `source`
and `raw_name` optional. The publisher (source id and title) comes with the call.
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
SHIPPED_PREFIX = "reprogrid:"  # a location in storage/data/
DATA_PREFIX = "data:"  # a location under the data folder
LEADERBOARD_COLUMNS = ("model", "score_pct", "std_pct", "num_responses")
# A leaderboard's model type -> tuning ("" for rows such as human baselines).
LEADERBOARD_TUNINGS = {"base": "base", "finetuned": "instruct", "instruct": "instruct"}

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
    tuning: str  # "base" | "instruct" ("" where a leaderboard row has none, e.g. humans)
    score_text: str  # the reported percentage exactly as printed, e.g. "44.9"
    source_id: str
    source_title: str
    table_or_location: str
    setting_notes: str
    found_via: str
    n_samples: int | None = None  # samples per problem behind the value, where the source says
    spread_text: str = ""  # a leaderboard's std over repeated runs (percentage points), as printed

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


FORMATS = ("papers", "leaderboard")  # workers/card.py LiteratureFormat's values


def parse_literature_as(
    text: str, source: str, form: str, source_id: str = "", title: str = ""
) -> list[LiteratureRow]:
    """Parse literature text in one of FORMATS (a leaderboard's rows cite `source_id`)."""
    if form == "papers":
        return parse_literature(text, source)
    if form == "leaderboard":
        return parse_leaderboard(text, source, source_id, title)
    raise LiteratureError(
        source, None, None, form, f"unknown literature format; formats: {', '.join(FORMATS)}"
    )


class LocationError(LiteratureError):
    """A literature or mapping location that cannot be read (names the location)."""

    def __init__(self, location: str, problem: str):
        super().__init__(location, None, None, None, problem)


def read_location(location: str, data_dir: str | None) -> tuple[str, str]:
    """The text of a `reprogrid:<file>` (shipped) or `data:<path>` (under `data_dir`) location,
    or of a plain path, and the name to cite it by. Raises LocationError."""
    if location.startswith(SHIPPED_PREFIX):
        name = location.removeprefix(SHIPPED_PREFIX)
        resource = resources.files("storage").joinpath("data", name)
        if not resource.is_file():
            raise LocationError(location, "no such file shipped with reprogrid (storage/data/)")
        return resource.read_text(encoding="utf-8"), location
    if location.startswith(DATA_PREFIX):
        if not data_dir:
            raise LocationError(
                location,
                "needs the data folder: set REPROGRID_DATA_DIR or paths.data_dir, or give the "
                "file with --literature",
            )
        path = Path(data_dir) / location.removeprefix(DATA_PREFIX)
    else:
        path = Path(location)
    try:
        return path.read_text(encoding="utf-8-sig"), str(path)
    except FileNotFoundError:
        raise LocationError(str(path), "file not found") from None
    except UnicodeDecodeError as e:
        raise LocationError(str(path), f"not UTF-8 ({e})") from e


def _size(params: str) -> str:
    """A leaderboard's parameter count as billions: "6.7B" -> "6.7", "46.7B / 12.9B" (total /
    active) -> "46.7", "?" or "" -> ""."""
    match = re.match(r"^\s*(\d+(\.\d+)?)\s*B", params)
    return match.group(1) if match else ""


def _leaderboard_row(
    values: dict[str, str], source: str, line: int, source_id: str, title: str
) -> LiteratureRow:
    for column in ("score_pct", "std_pct"):
        if not _SCORE.match(values[column]) or Decimal(values[column]) > 100:
            raise LiteratureError(
                source, line, column, values[column], "must be a percentage, e.g. 53.25"
            )
    responses = values["num_responses"]
    if not (responses.isdigit() and int(responses) >= 1):
        raise LiteratureError(
            source, line, "num_responses", responses, "must be a positive integer"
        )
    sampling = values.get("gen_params_temp_topp", "")
    notes = [
        f"sampling {sampling} (temperature, top_p)" if sampling.startswith("(") else sampling,
        f"{responses} responses per question",
        f"leaderboard group {values['source']}" if values.get("source") else "",
    ]
    return LiteratureRow(
        line=line,
        model=values["model"],
        model_family=values.get("family", ""),
        size_b=_size(values.get("params", "")),
        tuning=LEADERBOARD_TUNINGS.get(values.get("model_type", "").lower(), ""),
        score_text=values["score_pct"],
        source_id=source_id,
        source_title=title,
        table_or_location=f"leaderboard row {values.get('raw_name') or values['model']}",
        setting_notes="; ".join(n for n in notes if n),
        found_via="leaderboard",
        n_samples=int(responses),
        spread_text=values["std_pct"],
    )


def parse_leaderboard(text: str, source: str, source_id: str, title: str) -> list[LiteratureRow]:
    """Parse and validate a leaderboard CSV (the module docstring's columns); each row cites
    `source_id` and `title`. Raises LiteratureError at the first bad value."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in LEADERBOARD_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise LiteratureError(
            source,
            1,
            None,
            None,
            f"header lacks column(s) {', '.join(missing)}; a leaderboard has "
            f"{', '.join(LEADERBOARD_COLUMNS)}",
        )
    rows = []
    for record in reader:
        values = {k: (v or "").strip() for k, v in record.items() if k is not None}
        if not values["model"]:
            continue
        rows.append(_leaderboard_row(values, source, reader.line_num, source_id, title))
    if not rows:
        raise LiteratureError(source, None, None, None, "no leaderboard rows")
    return rows


# ---------------------------------------------------------------------------------------------
# The name mapping (a benchmark card's `mapping`, e.g. storage/data/humanevalfix-mapping.yaml,
# or a user's file)


@dataclass(frozen=True)
class LiteratureMapping:
    models: dict[str, str]  # literature model name (as printed) -> configured model name
    benchmark: str | None = None  # the benchmark whose literature it maps (None: not said)
    # Overrides of the card's reported variants and problem count (None: the card's).
    variants: tuple[str, ...] | None = None
    n_problems: int | None = None
    source: str = ""  # the file's name


def parse_literature_mapping(text: str, source: str) -> LiteratureMapping:
    """Check a mapping YAML: `models` maps names to model names; `benchmark` (whose
    literature it maps), `variants` and `n_problems` (overriding the benchmark card's) are
    optional. Raises LiteratureError."""
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
    n_problems = data.get("n_problems")
    try:
        n_problems = int(n_problems) if n_problems is not None else None
    except (TypeError, ValueError):
        raise LiteratureError(
            str(path), None, "n_problems", str(data.get("n_problems")), "must be an integer"
        ) from None
    variants = data.get("variants")
    return LiteratureMapping(
        models={str(k): v for k, v in models.items()},
        benchmark=str(data["benchmark"]) if data.get("benchmark") is not None else None,
        variants=tuple(str(v) for v in variants) if variants is not None else None,
        n_problems=n_problems,
        source=source,
    )
