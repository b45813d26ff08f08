"""GPUs of the target cluster before Ray (nvidia-smi -L, cluster.num_gpus, CUDA_VISIBLE_DEVICES)
and where each engine can run there."""

from __future__ import annotations

import stat
import sys
from dataclasses import replace

import pytest

from orchestrator.run.config.load import load_run_config
from orchestrator.run.preflight.hardware import (
    GpuInventory,
    GpuSource,
    Placement,
    detect_gpus,
    local_gpus,
    parse_nvidia_smi,
    place,
    visible,
)
from workers.backends.hf import HfOptions
from workers.spec import Dtype, EngineSpec, Quant

SMI = """GPU 0: NVIDIA H200 (UUID: GPU-11111111-2222-3333-4444-555555555555)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-aaaaaaaa-2222-3333-4444-555555555555)
  MIG 1g.10gb     Device  0: (UUID: MIG-bbbbbbbb-2222-3333-4444-555555555555)
"""


def test_parse_nvidia_smi_lists_whole_gpus():
    assert parse_nvidia_smi(SMI) == ("NVIDIA H200", "NVIDIA A100-SXM4-80GB")
    assert parse_nvidia_smi("No devices were found\n") == ()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ("a", "b", "c")),
        ("", ()),
        ("1", ("b",)),
        ("2,0", ("c", "a")),
        ("0,-1,2", ("a",)),  # CUDA stops at the first invalid index
        ("GPU-x,GPU-y", ("a", "b")),  # UUIDs: counted
    ],
)
def test_cuda_visible_devices_restricts_the_list(value, expected):
    assert visible(("a", "b", "c"), value)[0] == expected


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """A real `nvidia-smi` executable (a Python script) that prints SMI, alone on PATH."""
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!{sys.executable}\nprint({SMI!r}, end='')\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    return script


@pytest.fixture
def no_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))


def test_detect_gpus_runs_nvidia_smi(fake_smi):
    gpus = detect_gpus()
    assert (gpus.count, gpus.source) == (2, GpuSource.NVIDIA_SMI)
    assert detect_gpus("1").names == ("NVIDIA A100-SXM4-80GB",)


def test_no_driver_means_no_gpus(no_smi):
    assert detect_gpus() == GpuInventory(0, (), GpuSource.NO_DRIVER)


def test_local_cluster_counts_configured_gpus_first(fake_smi):
    cluster = load_run_config(["model=tiny", "cluster.num_gpus=1"]).cluster
    gpus = local_gpus(cluster)
    assert (gpus.count, gpus.source, gpus.names) == (1, GpuSource.CONFIGURED, ("NVIDIA H200",))
    remote = local_gpus(replace(cluster, address="head:6379"))
    assert remote.count is None and remote.source is GpuSource.REMOTE


def engine(num_gpus: int = 1, backend: str = "hf", device: str = "auto"):
    config = load_run_config(["model=tiny"])
    model = replace(config.models[0], num_gpus=num_gpus)
    return EngineSpec(model, backend, Dtype.FP32, Quant.NONE, options=HfOptions(device=device))


def inventory(count):
    return GpuInventory(count, ("NVIDIA H200",) * (count or 0), GpuSource.NVIDIA_SMI)


HF, REPLAY = "hf", "replay"
GPU, CPU, NO, UNKNOWN = Placement.GPU, Placement.CPU, Placement.IMPOSSIBLE, Placement.UNKNOWN


@pytest.mark.parametrize(
    ("needed", "count", "cpu_ok", "backend", "device", "placement", "needle"),
    [
        (1, 1, False, HF, "auto", GPU, "1 of 1 GPU"),
        (2, 1, True, HF, "auto", NO, "needs 2 GPUs and the cluster has 1"),
        (1, 0, True, HF, "auto", CPU, "runs on CPU (cluster.cpu_if_no_gpus=true)"),
        (1, 0, False, HF, "auto", NO, "set cluster.cpu_if_no_gpus=true"),
        (1, 0, True, HF, "cuda", NO, "hf.device=cuda"),
        (1, None, False, HF, "auto", UNKNOWN, "checked when Ray connects"),
        (1, 0, False, REPLAY, "auto", CPU, "needs no GPU"),
    ],
)
def test_place_mirrors_the_dispatcher(needed, count, cpu_ok, backend, device, placement, needle):
    cluster = replace(load_run_config(["model=tiny"]).cluster, cpu_if_no_gpus=cpu_ok)
    check = place(engine(needed, backend, device), inventory(count), cluster)
    assert check.placement is placement
    assert needle in check.reason
    assert check.engine.startswith("tiny ")
