"""What GPUs the target cluster has, known before Ray starts, and whether each engine can get
what it needs there.

The local cluster (no `cluster.address`): `cluster.num_gpus` when set (Ray then uses exactly
that), else what `nvidia-smi -L` lists, restricted to CUDA_VISIBLE_DEVICES as Ray restricts
it. No torch and no ray in the driver: nvidia-smi is the NVIDIA driver's own tool. A remote
cluster's GPUs are only known once connected; the dispatcher checks them then.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from orchestrator.run.config.specs import ClusterSpec
from workers.backends.registry import get_backend
from workers.spec import EngineSpec

NVIDIA_SMI_TIMEOUT_S = 20.0  # nvidia-smi answers in well under a second on a healthy driver
_SMI_LINE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: [^)]*\))?$")


class GpuSource(StrEnum):
    CONFIGURED = "cluster.num_gpus"  # the local instance is told how many
    NVIDIA_SMI = "nvidia-smi"  # listed by the driver's tool
    NO_DRIVER = "no nvidia-smi"  # no NVIDIA driver tool on this machine: no GPUs
    REMOTE = "remote cluster"  # known only after connecting


@dataclass(frozen=True)
class GpuInventory:
    """The GPUs the target cluster offers, as far as the driver can know before Ray."""

    count: int | None  # None: a remote cluster (unknown until connected)
    names: tuple[str, ...]  # device names where listed ("NVIDIA H200"), else ()
    source: GpuSource
    detail: str = ""  # why the count is what it is, when that is not obvious

    def describe(self) -> str:
        if self.count is None:
            return "a remote cluster (its GPUs are checked when Ray connects)"
        names = f": {', '.join(sorted(set(self.names)))}" if self.names else ""
        detail = f"; {self.detail}" if self.detail else ""
        return f"{self.count} GPU(s) ({self.source.value}{names}{detail})"


def parse_nvidia_smi(text: str) -> tuple[str, ...]:
    """Device names from `nvidia-smi -L` output, in index order (lines that are not a GPU,
    e.g. MIG instances, are skipped: Ray counts whole GPUs)."""
    names = []
    for line in text.splitlines():
        match = _SMI_LINE.match(line.strip())
        if match:
            names.append(match.group(2).strip())
    return tuple(names)


def visible(names: Sequence[str], cuda_visible: str | None) -> tuple[tuple[str, ...], str]:
    """The GPUs CUDA_VISIBLE_DEVICES leaves (integer indices, or UUIDs/MIG ids counted by
    number), and a note when the variable is set."""
    if cuda_visible is None:
        return tuple(names), ""
    ids = [part.strip() for part in cuda_visible.split(",") if part.strip()]
    if ids and all(i.lstrip("-").isdigit() for i in ids):
        chosen = []
        for i in ids:
            index = int(i)
            if index < 0:  # CUDA stops at the first invalid index
                break
            if index < len(names):
                chosen.append(names[index])
        return tuple(chosen), f"CUDA_VISIBLE_DEVICES={cuda_visible}"
    return tuple(names[: len(ids)]), f"CUDA_VISIBLE_DEVICES={cuda_visible}"


def detect_gpus(cuda_visible: str | None = None) -> GpuInventory:
    """The GPUs `nvidia-smi -L` lists, restricted to `cuda_visible` (CUDA_VISIBLE_DEVICES)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return GpuInventory(0, (), GpuSource.NO_DRIVER)
    names: tuple[str, ...] = ()
    detail = ""
    try:
        done = subprocess.run(
            [smi, "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        detail = f"nvidia-smi -L failed: {e}"
    else:
        if done.returncode == 0:
            names = parse_nvidia_smi(done.stdout)
        else:
            detail = f"nvidia-smi -L: {(done.stderr or done.stdout).strip()[:200]}"
    names, note = visible(names, cuda_visible)
    detail = "; ".join(x for x in (detail, note) if x)
    return GpuInventory(len(names), names, GpuSource.NVIDIA_SMI, detail)


def local_gpus(cluster: ClusterSpec) -> GpuInventory:
    """The target cluster's GPUs (see the module docstring)."""
    if cluster.address:
        return GpuInventory(None, (), GpuSource.REMOTE)
    detected = detect_gpus(cluster.visible_gpus)
    if cluster.num_gpus is not None:
        names = detected.names[: cluster.num_gpus]
        return GpuInventory(cluster.num_gpus, names, GpuSource.CONFIGURED)
    return detected


class Placement(StrEnum):
    GPU = "gpu"  # gets the GPUs it needs
    CPU = "cpu"  # runs on CPU (no GPU needed, or CPU engines allowed on a GPU-less cluster)
    UNKNOWN = "unknown"  # a remote cluster: decided when Ray connects
    IMPOSSIBLE = "impossible"  # cannot run here: a blocking problem


@dataclass(frozen=True)
class HardwareCheck:
    """Where one engine will run on the target cluster, and why."""

    engine: str  # "model backend dtype/quant"
    gpus_needed: int
    placement: Placement
    reason: str  # shown by plan next to the engine


def gpus_needed(engine: EngineSpec) -> int:
    """GPUs the dispatcher reserves for the engine (execute/dispatch.py): the model's, for a
    backend that uses GPUs."""
    return engine.model.num_gpus if get_backend(engine.backend).uses_gpus else 0


def engine_label(engine: EngineSpec) -> str:
    """ "model backend dtype/quant": how plan names an engine."""
    return f"{engine.model.name} {engine.backend} {engine.dtype.value}/{engine.quant.value}"


def place(engine: EngineSpec, gpus: GpuInventory, cluster: ClusterSpec) -> HardwareCheck:
    """Mirror of the dispatcher's rule: a cluster without GPUs runs engines on CPU only when
    `cluster.cpu_if_no_gpus` allows it; more GPUs than the cluster has cannot be placed."""
    label = engine_label(engine)
    needed = gpus_needed(engine)

    def check(placement: Placement, reason: str) -> HardwareCheck:
        return HardwareCheck(label, needed, placement, reason)

    if needed == 0:
        return check(Placement.CPU, "needs no GPU")
    if gpus.count is None:
        return check(Placement.UNKNOWN, f"needs {needed} GPU(s); checked when Ray connects")
    if gpus.count == 0:
        required = get_backend(engine.backend).gpu_requirement(engine)
        if required is not None:
            return check(Placement.IMPOSSIBLE, f"{required} and this machine has no GPU")
        if cluster.cpu_if_no_gpus:
            return check(
                Placement.CPU,
                f"needs {needed} GPU(s), none here: runs on CPU (cluster.cpu_if_no_gpus=true)",
            )
        return check(
            Placement.IMPOSSIBLE,
            f"needs {needed} GPU(s) and the cluster has none ({gpus.describe()}); "
            "set cluster.cpu_if_no_gpus=true to run it on CPU",
        )
    if needed > gpus.count:
        return check(Placement.IMPOSSIBLE, f"needs {needed} GPUs and the cluster has {gpus.count}")
    return check(Placement.GPU, f"{needed} of {gpus.count} GPU(s)")
