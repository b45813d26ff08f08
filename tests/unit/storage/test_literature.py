from __future__ import annotations

import pytest

from storage.literature import (
    COLUMNS,
    FORMATS,
    LiteratureError,
    LocationError,
    load_literature,
    parse_leaderboard,
    parse_literature,
    parse_literature_as,
    parse_literature_mapping,
    read_location,
)
from workers.benchmarks.humanevalfix.definition import CARD as HUMANEVALFIX
from workers.benchmarks.infibench.definition import CARD as INFIBENCH
from workers.card import LiteratureFormat

HEADER = ",".join(COLUMNS)
GOOD = "CodeLlama-13B,CodeLlama,13,base,6.1,arXiv:2405.04324,Granite,Table 11,greedy,primary-source"


def load_default_literature():
    """HumanEvalFix's published values: the file its card names (shipped in storage/data/)."""
    return parse_literature(*read_location(HUMANEVALFIX.literature, None))


def test_the_shipped_table_loads_with_the_printed_text():
    rows = load_default_literature()
    assert len(rows) == 95
    by = {(r.model, r.source_id): r for r in rows}
    codellama34 = by[("CodeLlama-34B", "arXiv:2405.04324")]
    assert codellama34.score_text == "14.0" and codellama34.decimals == 1
    assert codellama34.score_pct == 14.0
    assert by[("Mixtral-8x7B-v0.1", "arXiv:2405.04324")].size_b == "8x7"
    assert by[("GPT-4", "arXiv:2312.14187")].size_b == ""
    assert rows[0].line == 2  # the header is line 1


def test_the_shipped_copy_is_the_shared_data_file_plus_n_samples(shared_data):
    """Every column of the shared file, unchanged, and `n_samples` where the source states it:
    Granite (greedy, n=1) and OctoPack (n=20, GPT-4 n=1); blank everywhere else."""
    import csv
    import io
    from importlib import resources

    shipped = resources.files("storage").joinpath("data", "humanevalfix-python.csv").read_text()
    shared = (shared_data / "literature" / "humanevalfix-python.csv").read_text()
    ours = list(csv.reader(io.StringIO(shipped, newline="")))
    theirs = list(csv.reader(io.StringIO(shared, newline="")))
    assert [r[:-1] for r in ours] == theirs and ours[0][-1] == "n_samples"
    stated = {}
    for r in load_default_literature():
        stated.setdefault((r.source_id, r.n_samples), []).append(r)
    assert {k: len(v) for k, v in stated.items()} == {
        ("arXiv:2405.04324", 1): 41,
        ("arXiv:2308.07124", 20): 8,
        ("arXiv:2308.07124", 1): 1,
        ("arXiv:2312.14187", None): 19,
        ("arXiv:2405.15793", None): 5,
        ("arXiv:2407.16741", None): 7,
        ("doi:10.3390/software4030017", None): 14,
    }
    assert all("n=1" in r.setting_notes for r in stated[("arXiv:2405.04324", 1)])
    assert all("n=20" in r.setting_notes for r in stated[("arXiv:2308.07124", 20)])
    assert [r.model for r in stated[("arXiv:2308.07124", 1)]] == ["GPT-4"]


def test_n_samples_must_be_a_positive_integer_or_empty(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(f"{HEADER},n_samples\n{GOOD},20\n{GOOD},\n", encoding="utf-8")
    assert [r.n_samples for r in load_literature(path)] == [20, None]
    path.write_text(f"{HEADER},n_samples\n{GOOD},0\n", encoding="utf-8")
    with pytest.raises(LiteratureError, match="n_samples"):
        load_literature(path)


def test_a_user_csv_with_the_same_columns_loads(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(f"{HEADER},extra\n{GOOD},ignored\n", encoding="utf-8")
    [row] = load_literature(path)
    assert (row.model, row.tuning, row.score_text, row.line) == ("CodeLlama-13B", "base", "6.1", 2)


def _with(column: str, value: str) -> str:
    cells = GOOD.split(",")
    cells[COLUMNS.index(column)] = f'"{value}"' if "," in value else value
    return ",".join(cells)


@pytest.mark.parametrize(
    ("column", "value", "fragment"),
    [
        ("tuning", "chat", "base, instruct"),
        ("score_pct", "44,9", "percentage"),
        ("score_pct", "abc", "percentage"),
        ("score_pct", "101.0", "percentage"),
        ("score_pct", "-1", "percentage"),
        ("score_pct", "12%", "percentage"),
        ("score_pct", "", "percentage"),
        ("size_b", "big", "billions"),
        ("model", "", "must not be empty"),
        ("source_id", "", "must name the source"),
    ],
)
def test_bad_values_name_line_column_and_value(column, value, fragment):
    text = f"{HEADER}\n{GOOD}\n{_with(column, value)}\n"
    with pytest.raises(LiteratureError) as info:
        parse_literature(text, "lit.csv")
    err = info.value
    assert (err.source, err.line, err.column, err.value) == ("lit.csv", 3, column, value)
    message = str(err)
    assert "lit.csv:3" in message and repr(column) in message and fragment in message


def test_line_numbers_count_physical_lines_across_quoted_newlines():
    multiline = GOOD.replace("greedy", '"greedy,\nmultiline note"')
    text = f"{HEADER}\n{multiline}\n{_with('tuning', 'x')}\n"
    with pytest.raises(LiteratureError) as info:
        parse_literature(text, "lit.csv")
    assert info.value.line == 4


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty file"),
        ("model,score_pct\nA,1.0\n", "header lacks column(s) model_family"),
        (f"{HEADER}\n", "no literature rows"),
        (f"{HEADER}\nA,B,1,base\n", "has 4 fields, the header has 10"),
    ],
)
def test_bad_files(text, fragment):
    with pytest.raises(LiteratureError, match=None) as info:
        parse_literature(text, "lit.csv")
    assert fragment in str(info.value)


def test_missing_file_is_a_literature_error(tmp_path):
    with pytest.raises(LiteratureError, match="file not found"):
        load_literature(tmp_path / "nope.csv")


def test_is_a_value_error_for_the_cli():
    assert issubclass(LiteratureError, ValueError)


def test_the_mapping_loads_and_checks(tmp_path):
    from storage.literature import parse_literature_mapping

    def load_literature_mapping(path):
        return parse_literature_mapping(path.read_text(encoding="utf-8"), path.name)

    path = tmp_path / "map.yaml"
    path.write_text('variants: [tests, docs]\nmodels:\n  "CodeLlama 13B": codellama-13b-base\n')
    mapping = load_literature_mapping(path)
    assert mapping.models == {"CodeLlama 13B": "codellama-13b-base"}
    # benchmark and problem count unsaid: the benchmark card's apply
    assert (mapping.benchmark, mapping.variants, mapping.n_problems) == (
        None,
        ("tests", "docs"),
        None,
    )
    for text, fragment in [
        ("models: [a, b]\n", "must map literature names"),
        ("models: {a: b}\nn_problems: many\n", "must be an integer"),
        ("models: {a: [b]}\n", "must map literature names"),
        ("models: {a: b\n", "invalid YAML"),
    ]:
        path.write_text(text)
        with pytest.raises(LiteratureError, match=fragment):
            load_literature_mapping(path)


def test_the_shipped_mapping_names_configured_models_and_literature_rows():
    from orchestrator.run.config.compose import available

    mapping = parse_literature_mapping(*read_location(HUMANEVALFIX.mapping, None))
    assert mapping.benchmark == "humanevalfix"
    assert set(mapping.models.values()) <= set(available("model"))
    printed = {r.model for r in load_default_literature()}
    assert set(mapping.models) <= printed


# -- the InfiBench leaderboard: the file its card names, under the data folder -----------------


def test_the_leaderboard_loads_from_the_data_folder(shared_data):
    text, source = read_location(INFIBENCH.literature, str(shared_data))
    assert source == str(shared_data / "infibench" / "leaderboard.csv")
    rows = parse_literature_as(
        text, source, "leaderboard", INFIBENCH.literature_source_id, INFIBENCH.literature_title
    )
    assert len(rows) == 119
    by = {r.model: r for r in rows}
    gpt4 = by["GPT-4-0613"]
    assert (gpt4.score_text, gpt4.spread_text, gpt4.n_samples) == ("70.64", "0.82", 30)
    assert gpt4.source_id == "arXiv:2404.07940" and gpt4.tuning == "instruct"
    assert "sampling (0.2,0.9)" in gpt4.setting_notes
    coder = by["deepseek-coder-6.7b-instruct"]
    assert (coder.size_b, coder.model_family, coder.score_text) == (
        "6.7",
        "DeepSeek Coder",
        "53.25",
    )
    assert by["deepseek-coder-33b-instruct"].n_samples == 10
    assert by["mixtral-8x7B"].size_b == "46.7"  # total / active: the total
    assert by["Human Official"].tuning == ""  # a human baseline has no tuning
    assert by["deepseek-coder-1.3b-base"].tuning == "base"
    assert rows[0].line == 2


def test_the_infibench_mapping_names_configured_models_and_leaderboard_rows(shared_data):
    from orchestrator.run.config.compose import available

    mapping = parse_literature_mapping(*read_location(INFIBENCH.mapping, None))
    assert mapping.benchmark == "infibench"
    assert set(mapping.models.values()) <= set(available("model"))
    rows = parse_leaderboard(*read_location(INFIBENCH.literature, str(shared_data)), "s", "t")
    assert set(mapping.models) <= {r.model for r in rows}
    assert mapping.models["deepseek-coder-6.7b-instruct"] == "deepseekcoder-6.7b-instruct"


def test_a_data_location_needs_the_data_folder():
    with pytest.raises(LocationError, match="REPROGRID_DATA_DIR"):
        read_location(INFIBENCH.literature, None)
    with pytest.raises(LocationError, match="no such file shipped"):
        read_location("reprogrid:nothing.csv", None)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("model,score_pct\nA,1.0\n", "header lacks column(s) std_pct, num_responses"),
        ("model,score_pct,std_pct,num_responses\nA,1.0,x,30\n", "column 'std_pct'"),
        ("model,score_pct,std_pct,num_responses\nA,1.0,0.1,0\n", "positive integer"),
        ("model,score_pct,std_pct,num_responses\n", "no leaderboard rows"),
    ],
)
def test_bad_leaderboards(text, fragment):
    with pytest.raises(LiteratureError) as info:
        parse_leaderboard(text, "board.csv", "s", "t")
    assert fragment in str(info.value)


def test_the_formats_are_the_cards():
    assert FORMATS == tuple(f.value for f in LiteratureFormat)
    with pytest.raises(LiteratureError, match="formats: papers, leaderboard"):
        parse_literature_as("", "x", "yaml")
