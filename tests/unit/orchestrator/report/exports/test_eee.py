"""`reprogrid export --format eee`: a store's scores and the literature table as Every Eval Ever
records. The mapping is checked field by field on the synthetic store; the records are validated
with the EvalEval Coalition's own package (`every-eval-ever`, Python >= 3.12: the driver tier
runs those tests, the 3.11 suite skips them) by its schema models, its JSON schema and its
repository checks (paths, model identity, deployment fields)."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.report.exports.eee import SCHEMA_VERSION, generation_config
from orchestrator.report.exports.eeefields import model_identity, record_uuid, strings
from storage.literature import parse_literature, read_location
from storage.store import Store
from tests.fixtures_store import INST, Spec, write_setting, write_synthetic_store
from workers.benchmarks.humanevalfix.definition import CARD


def load_default_literature():
    """HumanEvalFix's published values: the file its card names."""
    return parse_literature(*read_location(CARD.literature, None))


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("eee")
    write_synthetic_store(str(root / "store"))
    code = main(
        ["export", "--store", str(root / "store"), "--format", "eee", "--out", str(root / "out")]
    )
    assert code == 0
    return root / "store", root / "out"


def records(out: Path, part: str) -> dict[str, dict]:
    return {
        str(p.relative_to(out / part)): json.loads(p.read_text())
        for p in sorted((out / part).rglob("*.json"))
    }


def by_setting(out: Path) -> dict[str, dict]:
    found = {}
    for log in records(out, "scores").values():
        key = log["source_metadata"]["additional_details"]["setting_key"]
        found[key] = log
    return found


def test_one_record_per_scored_setting_and_per_literature_value(exported):
    import pandas as pd

    store, out = exported
    scores = pd.read_parquet(store / "scores")
    assert set(by_setting(out)) == set(scores.setting_key)  # skipped/failed have no score
    assert len(records(out, "literature")) == len(load_default_literature())
    for path in records(out, "scores"):
        assert path.startswith("data/humanevalfix/deepseek-ai/deepseek-coder-1.3b-")


def test_settings_provenance_and_key_travel_in_generation_and_source_details(exported):
    import pandas as pd

    store, out = exported
    logs = by_setting(out)
    settings = pd.read_parquet(store / "settings").set_index("setting_key")
    scores = pd.read_parquet(store / "scores").set_index("setting_key")
    for key, log in logs.items():
        setting, score = settings.loc[key], scores.loc[key]
        (result, *rest) = log["evaluation_results"]
        generation = result["generation_config"]
        assert generation["additional_details"]["setting_key"] == key
        assert generation["additional_details"]["precision"] == setting.precision
        assert generation["additional_details"]["template"] == setting.template
        assert generation["additional_details"]["max_length"] == str(setting.max_length)
        assert generation["generation_args"]["temperature"] == setting.temperature
        assert "max_tokens" not in generation["generation_args"]  # prompt + output: not max_tokens
        assert log["source_metadata"]["additional_details"]["run_id"] == setting.run_id
        assert log["model_info"]["id"] == setting.model_repo_id
        assert log["model_info"]["additional_details"]["model_revision"] == setting.model_revision
        assert result["evaluation_result_id"] == "pass@1"
        assert result["score_details"]["score"] == score.pass_at_1
        interval = result["score_details"]["uncertainty"]["confidence_interval"]
        assert interval["lower"] <= score.pass_at_1 <= interval["upper"]
        assert result["score_details"]["details"]["n_problems"] == "164"
        # pass@10 only where every problem has 10 samples (none here: 1 or 5)
        assert [r["evaluation_result_id"] for r in rest] == []


def test_exporting_twice_writes_the_same_score_files(exported, tmp_path):
    store, out = exported
    assert (
        main(
            [
                "export",
                "--store",
                str(store),
                "--format",
                "eee",
                "--out",
                str(tmp_path),
                "--no-literature",
            ]
        )
        == 0
    )
    assert records(tmp_path, "scores") == records(out, "scores")
    assert not (tmp_path / "literature").exists()


def test_literature_records_keep_the_printed_score_and_the_mapped_model(exported):
    _, out = exported
    logs = list(records(out, "literature").values())
    mapped = [g for g in logs if g["model_info"]["name"] == "DeepSeekCoder 1.3B"]
    assert mapped and mapped[0]["model_info"]["id"] == "deepseek-ai/deepseek-coder-1.3b-base"
    for log in logs:
        result = log["evaluation_results"][0]
        printed = result["score_details"]["details"]["score_pct_as_printed"]
        assert math.isclose(result["score_details"]["score"], float(printed) / 100)
        assert log["source_metadata"]["source_type"] == "documentation"


def test_ids_are_stable_uuid4_names_and_flat_ids_have_a_developer():
    name = record_uuid("humanevalfix/x/y")
    assert name == record_uuid("humanevalfix/x/y") != record_uuid("humanevalfix/x/z")
    assert uuid.UUID(name).version == 4
    assert model_identity("deepseek-ai/deepseek-coder-1.3b-base", "m", "f") == (
        "deepseek-ai/deepseek-coder-1.3b-base",
        None,
    )
    assert model_identity("/cache/models/tiny-llama", "tiny", "tiny") == ("tiny", "tiny")
    assert model_identity(None, "SWE-agent w/ GPT-4", None) == ("SWE-agent w_ GPT-4", "local")


def test_a_new_token_limit_is_max_tokens_and_missing_values_are_left_out():
    setting = {
        "length_semantics": "new_tokens",
        "max_length": 1024,
        "temperature": 0.2,
        "top_p": float("nan"),
        "setting_key": "k",
    }
    config = generation_config(setting, None)
    assert config["generation_args"] == {"max_tokens": 1024, "temperature": 0.2}
    assert config["additional_details"] == {
        "length_semantics": "new_tokens",
        "max_length": "1024",
        "setting_key": "k",
    }
    assert strings({"a": None, "b": float("nan"), "c": True, "d": 2.0}) == {"c": "true", "d": "2"}


def test_an_unknown_format_is_refused(exported, capsys):
    store, out = exported
    with pytest.raises(SystemExit) as e:
        main(["export", "--store", str(store), "--format", "csv", "--out", str(out)])
    assert e.value.code == 2
    assert "invalid choice: 'csv'" in capsys.readouterr().err


# -- pilots: marked as subsets, or left out ---------------------------------------------------


@pytest.fixture(scope="module")
def exported_pilot(tmp_path_factory) -> tuple[Path, Path, str, str]:
    """A store of one full setting and one pilot (its first 10 problems) of the same cell."""
    root = tmp_path_factory.mktemp("eee-pilot")
    store = Store(str(root / "store"))
    full = write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 27))
    pilot = write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 4), n_problems=10)
    args = ["export", "--store", str(root / "store"), "--format", "eee", "--no-literature"]
    assert main([*args, "--out", str(root / "out")]) == 0
    return root / "store", root / "out", full, pilot


def test_a_pilot_is_marked_as_a_subset_where_consumers_read(exported_pilot):
    _, out, full, pilot = exported_pilot
    logs = by_setting(out)
    [whole] = logs[full]["evaluation_results"]
    [part] = logs[pilot]["evaluation_results"]
    assert whole["evaluation_name"] == "humanevalfix/tests"
    assert part["evaluation_name"] == "humanevalfix/tests (subset: 10 of 164 problems)"
    assert part["source_data"]["samples_number"] == 10
    assert part["source_data"]["sample_ids"] == [f"Python/{i}" for i in range(10)]
    assert part["source_data"]["additional_details"]["subset"] == "10 of 164"
    assert "sample_ids" not in whole["source_data"]
    assert "subset" not in whole["source_data"]["additional_details"]
    assert whole["source_data"]["samples_number"] == 164


def test_no_pilots_leaves_pilots_out(exported_pilot, tmp_path, capsys):
    store, _, full, _ = exported_pilot
    capsys.readouterr()
    args = ["export", "--store", str(store), "--format", "eee", "--out", str(tmp_path)]
    assert main([*args, "--no-literature", "--no-pilots"]) == 0
    printed = capsys.readouterr().out
    assert "1 score record(s)" in printed and "(1 pilot(s) left out)" in printed
    assert set(by_setting(tmp_path)) == {full}


def test_pilot_records_pass_the_every_eval_ever_validator(exported_pilot):
    _, out, _, _ = exported_pilot
    reports = validate(out / "scores")
    assert len(reports) == 2
    bad = [(r.file_path.name, r.errors, r.warnings) for r in reports if not r.valid or r.warnings]
    assert not bad, bad


# -- the EvalEval Coalition's validator (Python >= 3.12) --------------------------------------


def validate(root: Path) -> list:
    core = pytest.importorskip("every_eval_ever.validator.validation_core")
    files = sorted(root.rglob("*.json"))
    available = {str(p.relative_to(root)) for p in files}
    return [
        core.validate_file(
            p,
            repo_path=str(p.relative_to(root)),
            available_files=available,
            read_repo_file=lambda rel: (root / rel).read_text(),
            run_semantic_checks=True,
        )
        for p in files
    ]


@pytest.mark.parametrize("part", ["scores", "literature"])
def test_every_record_passes_the_every_eval_ever_validator(exported, part):
    _, out = exported
    reports = validate(out / part)
    assert reports
    bad = [(r.file_path.name, r.errors, r.warnings) for r in reports if not r.valid or r.warnings]
    assert not bad, bad[:3]


@pytest.mark.parametrize("part", ["scores", "literature"])
def test_every_record_matches_the_packaged_json_schema(exported, part):
    jsonschema = pytest.importorskip("jsonschema")
    schemas = pytest.importorskip("every_eval_ever.schemas")
    from importlib import resources

    schema = json.loads(resources.files(schemas).joinpath("eval.schema.json").read_text())
    _, out = exported
    for log in records(out, part).values():
        jsonschema.validate(log, schema)


def test_the_schema_version_is_the_validators():
    schema = pytest.importorskip("every_eval_ever.schema")
    assert schema.get_schema_version() == SCHEMA_VERSION
