"""`reprogrid compare`: the paired test of two settings, named by key, prefix or selection; the
same numbers as the report's comparisons; errors that name what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from orchestrator.cli import main
from orchestrator.report.tables.build import build_report
from orchestrator.report.tables.data import ReportOptions
from storage.store import Store
from tests.fixtures_store import BASE, INST, Spec, write_grid_store, write_setting

RESAMPLES = 400


@pytest.fixture(scope="module")
def grid_store(tmp_path_factory) -> tuple[str, dict]:
    root = str(tmp_path_factory.mktemp("grid") / "store")
    specs = write_grid_store(root)
    return root, specs


def key_of(specs: dict, **want) -> str:
    (key,) = [k for k, s in specs.items() if all(getattr(s, a) == v for a, v in want.items())]
    return key


def passed(store: Store, key: str) -> np.ndarray:
    rows = store.read_shard("executions", key).to_pandas().sort_values("task_id")
    return rows["passed"].to_numpy()


def run(capsys, *args) -> tuple[int, str, str]:
    code = main(["compare", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_selection_over_the_baseline_names_one_setting_and_gets_mcnemar(grid_store, capsys):
    root, specs = grid_store
    base = dict(model=BASE, decoding="greedy", max_length=2048, precision="bf16")
    a, b = key_of(specs, template="own", **base), key_of(specs, template="instruct", **base)
    code, out, _ = run(
        capsys,
        "--store",
        root,
        "template=own",
        "template=instruct",
        "--where",
        f"model={BASE}",
        "--json",
        "--resamples",
        str(RESAMPLES),
    )
    assert code == 0
    data = json.loads(out)
    assert (data["a"]["setting_key"], data["b"]["setting_key"]) == (a, b)
    store = Store(root)
    xa, xb = passed(store, a), passed(store, b)
    only_a, only_b = int(np.sum(xa & ~xb)), int(np.sum(~xa & xb))
    t = data["test"]
    assert (t["b"], t["c"], t["n"]) == (only_a, only_b, 164)
    assert t["method"] == "exact McNemar"
    assert t["p_value"] == pytest.approx(stats.binomtest(only_a, only_a + only_b).pvalue, abs=1e-9)
    assert t["delta_pp"] == pytest.approx(100 * (only_b - only_a) / 164)
    assert data["noise_pp"] is None  # the grid store has no repeat-check
    # the same comparison inside the report (same seed, same resamples): the same numbers
    report = build_report(root, ReportOptions(n_resamples=RESAMPLES))
    rows = report.table("comparisons")
    row = rows[(rows.family.str.startswith(BASE)) & (rows.axis == "template")].iloc[0]
    assert (row.b, row.c) == (only_a, only_b)
    assert row.p_value == pytest.approx(t["p_value"], abs=1e-12)
    assert (row.ci_low_pp, row.ci_high_pp) == pytest.approx((t["ci_low_pp"], t["ci_high_pp"]))


def test_keys_and_prefixes_and_the_text_output(grid_store, capsys):
    root, specs = grid_store
    a = key_of(
        specs, model=INST, template="own", decoding="greedy", max_length=2048, precision="bf16"
    )
    b = key_of(
        specs, model=INST, template="own", decoding="greedy", max_length=2048, precision="int4"
    )
    code, out, _ = run(capsys, "--store", root, a[:12], b, "--resamples", str(RESAMPLES))
    assert code == 0
    assert out.splitlines()[0].startswith(f"A {a[:12]} {INST} own(deepseek) greedy 2048 bf16 hf")
    assert "exact McNemar p = " in out and "detectable at 80% power" in out
    assert "noise floor: no re-generation noise measured" in out


def test_errors_name_the_bad_value_and_the_choices(grid_store, capsys):
    root, specs = grid_store
    code, _, err = run(capsys, "--store", root, "template=own", "template=instruct")
    assert code == 2
    assert "2 settings have template=own at the effects baseline's decoding=greedy" in err
    assert "name one with model" in err and BASE in err and INST in err
    code, _, err = run(capsys, "--store", root, "templte=own", "template=own")
    assert "Unknown selection key 'templte'. Did you mean: template?" in err
    code, _, err = run(capsys, "--store", root, "precision=int3", "precision=int4")
    assert code == 2
    assert "No complete setting has precision 'int3'. Did you mean: precision=int" in err
    code, _, err = run(capsys, "--store", root, "ffff", "0000")
    assert code == 2 and "setting 'ffff' matches no complete setting" in err


def test_settings_over_other_problems_or_another_variant_cannot_be_paired(tmp_path, capsys):
    store = Store(str(tmp_path / "store"))
    full = write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 27))
    pilot = write_setting(store, Spec(INST, "own", "greedy", 512, "bf16", 3), n_problems=10)
    docs = write_setting(store, Spec(INST, "own", "greedy", 2048, "fp16", 20, variant="docs"))
    code, _, err = run(capsys, "--store", store.uri, full, pilot)
    assert (
        code == 2 and "154 only in A (Python/10, Python/100, Python/101, ...), 0 only in B" in err
    )
    code, _, err = run(capsys, "--store", store.uri, full, docs)
    assert code == 2 and "the settings differ in variant (tests vs docs)" in err


def test_a_resampled_p_at_its_floor_prints_as_a_bound(tmp_path, capsys):
    """Five samples per problem (the sign-flip test): B passes on nearly every problem, A on
    none, so no resample is as extreme and the p is its floor 2/(400 + 1), below which the
    exact p lies: "p < 0.005", not "p = 0.004988"."""
    store = Store(str(tmp_path / "store"))
    a = write_setting(store, Spec(INST, "own", "t0.8", 2048, "bf16", 0, n_samples=5))
    b = write_setting(store, Spec(INST, "own", "t0.8", 2048, "fp16", 600, n_samples=5))
    args = ["--store", store.uri, a, b, "--resamples", str(RESAMPLES)]
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "sign-flip permutation p < 0.005;" in out and "p = " not in out
    code, out, _ = run(capsys, *args, "--json")
    test = json.loads(out)["test"]
    assert test["p_value"] == pytest.approx(2 / (RESAMPLES + 1)) and not test["exhaustive"]


def test_a_typo_in_any_value_gets_a_did_you_mean(grid_store, capsys):
    root, _ = grid_store
    code, _, err = run(capsys, "--store", root, "template=owm,precision=fp32", "template=own")
    assert code == 2
    assert "No complete setting has template 'owm'. Did you mean: template=own?" in err
    assert "Values in the store: deepseek, instruct, own" in err
    code, _, err = run(
        capsys, "--store", root, "template=own", "x=1", "--where", "model=deepseekcoder-1.3b-bse"
    )
    assert code == 2 and f"Did you mean: model={BASE}?" in err


def test_an_error_names_the_baselines_values_as_the_baselines_and_how_to_free_them(
    tmp_path, capsys
):
    """A model run at fp16 only: `template=own` takes the baseline's precision=bf16, which the
    user never typed; the error says so and how to free it, and freeing it works."""
    store = Store(str(tmp_path / "store"))
    for template in ("own", "instruct"):
        write_setting(store, Spec(INST, template, "greedy", 2048, "fp16", 20))
    code, _, err = run(capsys, "--store", store.uri, "template=own", "template=instruct")
    assert code == 2
    assert "no complete setting has template=own at the effects baseline's decoding=greedy " in err
    assert (
        "the settings with template=own have precision fp16, not the baseline's bf16; name one "
        "(precision=fp16) or free it (precision=*)" in err
    )
    # the one value the user did not type is named as the baseline's
    assert (
        err.count("precision=bf16") == 1
        and "baseline's decoding=greedy max_length=2048 precision=bf16" in err
    )
    args = ["template=own", "template=instruct", "--where", "precision=*", "--resamples", "50"]
    code, out, _ = run(capsys, "--store", store.uri, *args)
    assert code == 0 and "exact McNemar" in out


def test_typed_values_that_never_meet_say_so(tmp_path, capsys):
    store = Store(str(tmp_path / "store"))
    write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 20))
    write_setting(store, Spec(INST, "instruct", "greedy", 2048, "fp16", 20))
    code, _, err = run(capsys, "--store", store.uri, "template=instruct,precision=bf16", "x")
    assert code == 2
    assert "no complete setting has template=instruct precision=bf16 (each value is in" in err
