"""Planning against a store: done / generate / execute-only / failed / skipped."""

from __future__ import annotations

import pytest

from orchestrator.run.config.load import load_run_config
from orchestrator.run.execute.writer import StoreWriter
from orchestrator.run.plan.planner import Action, plan_settings
from orchestrator.run.prepare.grid import Environment, expand_grid
from storage.index import build_index
from storage.store import Store
from workers.benchmarks.humanevalfix.adapter import HumanEvalFix
from workers.benchmarks.humanevalfix.definition import HUMANEVALFIX
from workers.card import card_from_json
from workers.execspec import ExecutionBatch, ExecutionRecord, Outcome, SandboxLimits
from workers.spec import EngineInfo, SampleRecord, SettingGenerations, WorkerInfo

INFO = EngineInfo("fake", {}, "cpu", "float32", "r", "", None, "</s>", {})


def generated(key: str, n: int = 3) -> SettingGenerations:
    samples = tuple(
        SampleRecord(f"Python/{i}", 0, "p", "c", "prog", 10, 5, i == 0, False) for i in range(n)
    )
    return SettingGenerations(key, samples, INFO, WorkerInfo("h", "node", 1), 1.5, 0.5, 1.0, 2.0)


ENVIRONMENT = {"isolation": "full", "python": "CPython 3.11.7"}


def executed(n: int = 3, passed: int = 2) -> ExecutionBatch:
    return ExecutionBatch(
        tuple(
            ExecutionRecord(
                f"Python/{i}",
                0,
                Outcome.PASSED if i < passed else Outcome.FAILED,
                1.0 if i < passed else 0.0,
                None,
                None,
                0.1,
            )
            for i in range(n)
        ),
        ENVIRONMENT,
    )


@pytest.fixture
def writer_for(problem_set):
    def make(
        store: Store, run_id: str, versions: str = "{}", planned_environment=None
    ) -> StoreWriter:
        benchmarks = {"humanevalfix": HumanEvalFix(problem_set)}
        return StoreWriter(
            store,
            run_id,
            versions,
            benchmarks,
            limits=SandboxLimits(),
            planned_environment=planned_environment,
        )

    return make


@pytest.fixture
def cells():
    config = load_run_config(
        ["model=tiny", "template=own,instruct,diff", "decoding=greedy,t0.8", "benchmark.limit=3"]
    )
    return expand_grid(config, "hash", Environment())


def test_a_fresh_store_plans_everything_and_skips_with_reasons(cells, tmp_path):
    plan = plan_settings(cells, build_index(Store(str(tmp_path))))
    counts = {a: len(plan.by_action(a)) for a in Action}
    assert counts[Action.GENERATE] == 4 and counts[Action.SKIP] == 2
    assert all("diff" in s.reason for s in plan.by_action(Action.SKIP))
    assert plan.n_engine_loads == 1
    assert plan.n_generations(164) == 4 * 3  # benchmark.limit=3


def test_resume_states_come_from_the_files(cells, tmp_path, writer_for):
    store = Store(str(tmp_path))
    writer = writer_for(store, "run1")
    runnable = [c for c in cells if not c.skipped]
    done, half, failed, _ = runnable
    for cell in (done, half):
        writer.started(cell.key, cell.setting)
        writer.generated(cell.key, cell.setting, generated(cell.key))
    score = writer.executed(done.key, done.setting, executed())
    writer.started(failed.key, failed.setting)
    writer.failed(failed.key, failed.setting, "RuntimeError", "boom")
    assert score["pass_at_1"] == pytest.approx(2 / 3)
    assert score["n_prompt_truncated"] == 1
    # the exact counts behind it, and the benchmark's card with the setting (schema 5)
    stored = store.read_shard("scores", done.key).to_pylist()[0]
    assert (stored["pass_at_1_numerator"], stored["pass_at_1_denominator"]) == (2, 3)
    assert stored["n_scored"] == 3 and stored["problem_n_passed"] == [1, 1, 0]
    assert stored["problem_ids"] == ["Python/0", "Python/1", "Python/2"]
    assert stored["problem_scores"] == [1.0, 1.0, 0.0]
    row = store.read_shard("settings", done.key).to_pylist()[0]
    assert card_from_json(row["benchmark_card_json"]) == HUMANEVALFIX.card

    plan = plan_settings(cells, build_index(store))
    actions = {p.key: p.action for p in plan.settings}
    assert actions[done.key] is Action.DONE
    assert actions[half.key] is Action.EXECUTE  # generations kept, only executed again
    assert actions[failed.key] is Action.FAILED
    assert [p.reason for p in plan.by_action(Action.FAILED)] == ["boom"]
    assert len(plan.by_action(Action.GENERATE)) == 1
    retry = plan_settings(cells, build_index(store), retry_failed=True)
    assert {p.key: p.action for p in retry.settings}[failed.key] is Action.GENERATE

    # a damaged result shard makes a complete setting execute again, never silently "done"
    (tmp_path / "scores" / f"{done.key}.parquet").write_bytes(b"torn")
    again = {p.key: p.action for p in plan_settings(cells, build_index(store)).settings}
    assert again[done.key] is Action.EXECUTE


def test_writer_keeps_provenance_and_counts_generation_attempts(cells, tmp_path, writer_for):
    store = Store(str(tmp_path))
    cell = next(c for c in cells if not c.skipped)
    first = writer_for(store, "run1", '{"torch": "x"}')
    first.started(cell.key, cell.setting)
    first.generated(cell.key, cell.setting, generated(cell.key))
    second = writer_for(store, "run2")  # a resumed run that only executes
    second.started(cell.key, cell.setting)
    second.executed(cell.key, cell.setting, executed())
    row = store.read_shard("settings", cell.key).to_pylist()[0]
    # one generation attempt: executing stored generations again is not one
    assert row["status"] == "complete" and row["attempts"] == 1 and row["run_id"] == "run2"
    assert row["hostname"] == "h" and row["generation_s"] == 1.5
    assert row["library_versions_json"] == '{"torch": "x"}'
    # the facts a report needs, fixed at run time
    assert (row["n_problems"], row["benchmark_n_problems"]) == (3, 164)
    assert (row["template_kind"], row["model_own_template"]) == (
        "own" if cell.setting.template == "yi" else cell.setting.template,
        "yi",
    )


@pytest.mark.parametrize(
    ("error_type", "action"),
    [
        ("ActorDiedError", Action.GENERATE),
        ("NodeDiedError", Action.GENERATE),
        ("RuntimeError", Action.FAILED),
        ("Timeout", Action.FAILED),
    ],
)
def test_a_dead_worker_is_retried_by_a_plain_rerun_an_exception_is_not(
    cells, tmp_path, error_type, action, writer_for
):
    store = Store(str(tmp_path))
    cell = next(c for c in cells if not c.skipped)
    writer = writer_for(store, "run1")
    writer.started(cell.key, cell.setting)
    writer.failed(cell.key, cell.setting, error_type, "gone")
    plan = plan_settings(cells, build_index(store))
    assert {p.key: p.action for p in plan.settings}[cell.key] is action


def test_units_are_planned_the_longest_first(tmp_path):
    """Bytes read per token x bitsandbytes' slow-down x samples: 8-bit (1 B x 4.7 x 2) before
    fp32 (4 B) before 4-bit (0.5 B x 1.33 x 4) before 16 bits; a larger model first, and
    ties in grid order. Grid order would leave the slowest units for the end."""
    config = load_run_config(
        [
            "model=deepseekcoder-1.3b-instruct,deepseekcoder-6.7b-instruct",
            "precision=bf16,fp16,fp32,int8,int4",
            "benchmark.limit=1",
        ]
    )
    cells = expand_grid(config, "hash", Environment())
    plan = plan_settings(cells, build_index(Store(str(tmp_path))))
    order = [
        (u.engine.model.size_b, u.engine.dtype.value, u.engine.quant.value) for u in plan.units
    ]
    assert order == [
        (6.7, "fp16", "int8"),
        (6.7, "fp32", "none"),
        (6.7, "fp16", "int4"),
        (6.7, "bf16", "none"),
        (6.7, "fp16", "none"),
        (1.3, "fp16", "int8"),
        (1.3, "fp32", "none"),
        (1.3, "fp16", "int4"),
        (1.3, "bf16", "none"),
        (1.3, "fp16", "none"),
    ]


def test_an_execution_in_another_environment_is_told_and_planned_again(
    cells, tmp_path, writer_for, caplog
):
    """A worker whose sandbox came out weaker than the driver's: its executions are stored as
    they ran, the run says so (once per difference), and the next plan executes them again
    naming the change."""
    from orchestrator.run.prepare.prepared import ExecutionIdentity
    from workers.keys import canonical_json, execution_fields, execution_key

    store = Store(str(tmp_path))
    writer = writer_for(store, "run1", planned_environment=ENVIRONMENT)
    same, weaker, also_weaker = [c for c in cells if not c.skipped][:3]
    batches = {
        same.key: executed(),
        weaker.key: ExecutionBatch(executed().records, {**ENVIRONMENT, "isolation": "process"}),
        also_weaker.key: ExecutionBatch(
            executed().records, {**ENVIRONMENT, "isolation": "process"}
        ),
    }
    with caplog.at_level("WARNING", logger="orchestrator.run.execute.writer"):
        for cell in (same, weaker, also_weaker):
            writer.started(cell.key, cell.setting)
            writer.generated(cell.key, cell.setting, generated(cell.key))
            writer.executed(cell.key, cell.setting, batches[cell.key])
    told = [r.getMessage() for r in caplog.records]
    assert len(told) == 1, told
    assert weaker.key[:12] in told[0] and "environment.isolation 'full' -> 'process'" in told[0]
    # a writer outside `run` (no planned environment) compares nothing
    caplog.clear()
    other = writer_for(Store(str(tmp_path / "other")), "run2")
    with caplog.at_level("WARNING", logger="orchestrator.run.execute.writer"):
        other.started(weaker.key, weaker.setting)
        other.generated(weaker.key, weaker.setting, generated(weaker.key))
        other.executed(weaker.key, weaker.setting, batches[weaker.key])
    assert not caplog.records

    limits = SandboxLimits()
    identities = {
        c.key: ExecutionIdentity(
            execution_key(c.key, limits, ENVIRONMENT),
            canonical_json(execution_fields(c.key, limits, ENVIRONMENT)),
        )
        for c in cells
    }
    plan = {
        p.key: p for p in plan_settings(cells, build_index(store), execution=identities).settings
    }
    assert plan[same.key].action is Action.DONE
    for cell in (weaker, also_weaker):
        assert plan[cell.key].action is Action.EXECUTE
        assert "environment.isolation 'process' -> 'full'" in plan[cell.key].reason
