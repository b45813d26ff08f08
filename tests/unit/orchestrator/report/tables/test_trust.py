"""The report cannot be silently wrong (Trust §2, §3, §4): a pilot subset never passes for a
reproduction, obtainability follows how the source sampled, and the report reads the store
alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.cli.report import card_from_registry
from orchestrator.report.tables.build import build_report
from orchestrator.report.tables.data import ReportOptions
from storage.literature import COLUMNS
from storage.store import Store
from tests.fixtures_store import INST, Spec, write_setting

SWEEPS = Path(__file__).resolve().parents[5] / "sweeps"


def literature_csv(tmp_path: Path, values: list[str]) -> str:
    path = tmp_path / "lit.csv"
    lines = [",".join(COLUMNS)]
    for i, value in enumerate(values):
        lines.append(
            f"DeepSeekCoder-Instruct 1.3B,DeepSeekCoder,1.3,instruct,{value},src{i},t,T1,notes,x"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def pilot_store(tmp_path):
    store = Store(str(tmp_path / "store"))
    pilot = write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 3), n_problems=10)
    full = write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 27))  # 16.46
    return store, pilot, full


def test_a_ten_problem_setting_never_gets_a_verdict(pilot_store, tmp_path):
    """3/10 = 30.0 'reproduces' 30.0 and is the closest setting to 48.9: neither may be said."""
    store, pilot, full = pilot_store
    options = ReportOptions(
        card_of=card_from_registry,
        literature_path=literature_csv(tmp_path, ["30.0", "16.4", "48.9"]),
    )
    data = build_report(store.uri, options)
    lit = data.table("literature").set_index("reported")
    assert list(lit["status"]) == ["not reproduced", "reproduced", "not reproduced"]
    for value in ("30.0", "16.4", "48.9"):
        row = lit.loc[value]
        assert pilot not in (row["reproduced_by_keys"] or "") and row["closest_key"] == full
        assert row["pilots"].endswith("subset (10 of 164)")
        assert row["pilots"].startswith("not compared (a subset of the problems)")
    assert lit.loc["16.4", "reproduced_by_keys"] == full
    grid = data.table("grid").set_index("setting_key")
    assert grid.loc[pilot, "subset"] == "subset (10 of 164)" and grid.loc[pilot, "n_problems"] == 10
    assert grid.loc[full, "subset"] == ""
    assert any("1 setting(s) scored a subset" in n for n in data.notes)


def test_only_a_pilot_is_said_to_be_only_a_pilot(tmp_path):
    store = Store(str(tmp_path / "store"))
    write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 3), n_problems=10)
    options = ReportOptions(
        card_of=card_from_registry, literature_path=literature_csv(tmp_path, ["30.0"])
    )
    row = build_report(store.uri, options).table("literature").iloc[0]
    assert row["status"] == "only a pilot subset" and row["closest_setting"] is None
    assert row["n_reproducing"] == 0 and row["pilots"].endswith("subset (10 of 164)")


def test_obtainability_follows_the_sources_sampling(tmp_path):
    store = Store(str(tmp_path / "store"))
    write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 27))
    data = build_report(store.uri, ReportOptions(card_of=card_from_registry))
    unobtainable = data.table("unobtainable")
    octopack = unobtainable[unobtainable["source_id"] == "arXiv:2308.07124"]
    assert "StarCoder" not in set(octopack["literature_model"])  # 8.7 from n=20: obtainable
    assert "WizardCoder" not in set(octopack["literature_model"])  # 31.8 from n=20
    verdicts = set(unobtainable["obtainability"])
    assert verdicts <= {"not obtainable", "not obtainable with one sample per problem"}
    unknown = unobtainable[unobtainable["n_samples_reported"].isna()]
    assert set(unknown["obtainability"]) == {"not obtainable with one sample per problem"}
    note = next(n for n in data.notes if "reported value(s)" in n)
    assert "not obtainable with one sample per problem" in note


def _report_json(store: str, out: Path, capsys) -> dict:
    assert main(["report", "--store", store, "--out", str(out), "--format", "json"]) == 0
    capsys.readouterr()
    doc = json.loads((out / "report.json").read_text())
    doc.pop("generated_at")
    return doc


def test_the_report_is_the_same_after_the_models_yaml_is_edited_or_deleted(
    env, capsys, tmp_path, monkeypatch, problem_set
):
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.execute.writer import StoreWriter
    from orchestrator.run.prepare.grid import Environment, expand_grid
    from tests.unit.orchestrator.run.plan.test_plan import generated
    from workers.benchmarks.humanevalfix.adapter import HumanEvalFix
    from workers.execspec import ExecutionBatch, ExecutionRecord, Outcome, SandboxLimits

    store = Store(str(tmp_path / "store"))
    config = load_run_config(["model=tiny", "template=own,instruct", "benchmark.limit=2"])
    benchmarks = {"humanevalfix": HumanEvalFix(problem_set)}
    writer = StoreWriter(store, "r1", "{}", benchmarks, limits=SandboxLimits())
    for cell in expand_grid(config, problem_set.sha256, Environment()):
        writer.started(cell.key, cell.setting)
        writer.generated(cell.key, cell.setting, generated(cell.key, n=2))
        records = tuple(
            ExecutionRecord(f"Python/{i}", 0, Outcome.PASSED, 1.0, None, None, 0.1)
            for i in range(2)
        )
        writer.executed(cell.key, cell.setting, ExecutionBatch(records, {"python": "x"}))
    before = _report_json(store.uri, tmp_path / "r0", capsys)
    sweeps = tmp_path / "sweeps"
    shutil.copytree(SWEEPS, sweeps)
    monkeypatch.setenv("REPROGRID_SWEEPS_DIR", str(sweeps))
    tiny = sweeps / "model" / "tiny.yaml"
    tiny.write_text(tiny.read_text().replace("own_template: yi", "own_template: instruct"))
    assert _report_json(store.uri, tmp_path / "r1", capsys) == before
    tiny.unlink()
    assert _report_json(store.uri, tmp_path / "r2", capsys) == before
    kinds = {r["template"]: r["template_kind"] for r in before["tables"]["grid"]["rows"]}
    assert kinds == {"yi": "own", "instruct": "instruct"}
