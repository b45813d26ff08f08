"""Where one engine replica fits: on how many GPUs of a kind, at which precision, on which
larger GPU. Pure: no I/O. `plan` names these when an engine cannot run on the cluster it is
sized for (orchestrator/run/estimate/fit.py; docs/cost.md, "What cannot run").

A replica fits when its weights, the KV cache of its sequences at the length limit and its
CUDA context fit the usable part of its GPUs' memory (analysis/replicas.py, the rule that caps
`cluster.replicas`): stricter than the weights alone, so what is proposed also loads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from orchestrator.analysis.cost import GPUS, DeviceSpec, EngineWork, bytes_per_weight
from orchestrator.analysis.replicas import replica_memory_gb, replicas_that_fit
from workers.spec import PRECISIONS

# Ray places an engine's GPUs on one node, and a node holds up to 8: more is never proposed.
MAX_GPUS_PER_ENGINE = 8
# The quantizations a smaller footprint can come from, most precise first (precision=...).
QUANTIZED = ("int8", "int4")


def weights_gb(work: EngineWork) -> float:
    """The weights at the engine's precision, GB (1e9 bytes)."""
    return work.size_b * bytes_per_weight(work.dtype, work.quant)


def fits(work: EngineWork, device: DeviceSpec, n_gpus: int, max_length: int, seqs: int) -> bool:
    """One replica on `n_gpus` of `device` (a device without a memory figure: not checked)."""
    fit = replicas_that_fit(replica_memory_gb(work, max_length, seqs), device, n_gpus)
    return fit is None or fit >= 1


def fewest_gpus(work: EngineWork, device: DeviceSpec, max_length: int, seqs: int) -> int | None:
    """The fewest GPUs of `device` one replica fits on, up to MAX_GPUS_PER_ENGINE; None: none."""
    for n in range(1, MAX_GPUS_PER_ENGINE + 1):
        if fits(work, device, n, max_length, seqs):
            return n
    return None


@dataclass(frozen=True)
class Quantized:
    """The engine at a smaller precision."""

    precision: str  # the `precision` value: int8 | int4
    replica_gb: float  # one replica's memory at that precision
    gpus: int  # the fewest GPUs of the device it fits on


@dataclass(frozen=True)
class Alternatives:
    """What would fit, for one engine on GPUs of one kind."""

    gpus: int | None  # the fewest GPUs of the kind at its precision (None: more than a node)
    replica_gb: float  # one replica's memory at its precision
    quantized: tuple[Quantized, ...]  # smaller precisions that fit on `within` GPUs
    larger: tuple[str, ...]  # GPUS keys with more memory it fits on `within` of, smallest first


def alternatives(
    work: EngineWork, device: DeviceSpec, within: int, max_length: int, seqs: int
) -> Alternatives:
    """What fits `within` GPUs: fewer GPUs of `device`, a quantization, a GPU with more memory.
    `max_length` and `seqs` size the KV cache (the unit's longest limit, its sequences per
    call)."""
    smaller = []
    for name in QUANTIZED:
        dtype, quant = PRECISIONS[name]
        shrunk = replace(work, dtype=dtype, quant=quant)
        if bytes_per_weight(dtype, quant) >= bytes_per_weight(work.dtype, work.quant):
            continue
        n = fewest_gpus(shrunk, device, max_length, seqs)
        if n is not None and n <= within:
            smaller.append(Quantized(name, replica_memory_gb(shrunk, max_length, seqs), n))
    larger = sorted(
        (g for g in GPUS.values() if (g.memory_gb or 0) > (device.memory_gb or 0)),
        key=lambda g: (g.memory_gb or 0, g.name),
    )
    return Alternatives(
        gpus=fewest_gpus(work, device, max_length, seqs),
        replica_gb=replica_memory_gb(work, max_length, seqs),
        quantized=tuple(smaller),
        larger=tuple(g.name for g in larger if fits(work, g, within, max_length, seqs)),
    )
