"""The one place where keys and derived seeds are made.

A setting key is the sha256 of the canonical JSON of every field that can change an output.
Labels (model config name, decoding name, precision label, the backend an imported file claims),
paths of the store, worker counts and batching knobs that do not change outputs are left out.
Greedy settings drop the sampling parameters and the seed, which cannot change a greedy output.
A model is named by its Hub id, or, for a local folder, by what the folder holds
(`ModelSpec.identity`), never by where the folder lies.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from workers.backends.registry import get_backend
from workers.execspec import SandboxLimits
from workers.spec import EngineSpec, Quant, SeedPolicy, SettingSpec

# Bump when the derivation changes for every setting (tests/unit/workers/test_keys.py pins keys
# of fixed settings to literal hashes, so a change here cannot pass unnoticed). A change that
# invalidates one class of settings adds a field to that class's keys instead, so the others'
# stored results stay valid.
KEY_SCHEMA_VERSION = 1
HARNESS_STREAM_REVISION = 2  # keyed for sampled settings under seed_policy=harness (see below)


class UnkeyableValue(TypeError):
    """A value that has no canonical JSON form (only JSON-native values may be hashed)."""


def _check(value: Any, where: str) -> None:
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnkeyableValue(f"{where}: non-finite float {value!r} cannot be keyed")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise UnkeyableValue(f"{where}: non-string key {k!r}")
            _check(item, f"{where}.{k}")
        return
    raise UnkeyableValue(f"{where}: {type(value).__name__} value {value!r} is not JSON-native")


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace, UTF-8; rejects anything that is not JSON-native."""
    _check(obj, "$")
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def engine_fields(engine: EngineSpec) -> dict[str, Any]:
    """The output-relevant fields of an engine (model identity, backend, numerics)."""
    model = engine.model
    fields: dict[str, Any] = {
        # A local folder by its content (or its builder's recipe); a Hub model by its id.
        "model": model.identity if model.identity is not None else model.repo_id,
        "revision": engine.model.revision,
        "backend": engine.backend,
        "dtype": engine.dtype.value,
        "quant": engine.quant.value,
    }
    if engine.quant is Quant.INT4:
        fields["bnb_4bit_quant_type"] = engine.bnb_4bit_quant_type.value
    # What only this backend can change (its definition's `key_fields`).
    fields.update(get_backend(engine.backend).key_fields(engine))
    return fields


def engine_key(engine: EngineSpec) -> str:
    """Groups settings that share one model load."""
    return sha256_hex(canonical_json({"v": KEY_SCHEMA_VERSION, **engine_fields(engine)}))


def setting_fields(setting: SettingSpec) -> dict[str, Any]:
    decoding = setting.decoding
    fields: dict[str, Any] = {
        "v": KEY_SCHEMA_VERSION,
        "engine": engine_fields(setting.engine),
        "benchmark": setting.benchmark.name,
        "variant": setting.benchmark.variant,
        "data_sha256": setting.benchmark.data_sha256,
        "limit": setting.benchmark.limit,
        "template": setting.template,
        "max_length": setting.max_length,
        "length_semantics": setting.length_semantics.value,
        "n_samples": setting.n_samples,
        "do_sample": decoding.do_sample,
    }
    if setting.benchmark.problems is not None:
        # Only when set: the key of every setting without a selection stays what it was.
        fields["problems"] = list(setting.benchmark.problems)
    if decoding.do_sample:
        fields.update(
            temperature=float(decoding.temperature),
            top_p=float(decoding.top_p),
            top_k=int(decoding.top_k),
            seed=setting.seed,
            seed_policy=setting.seed_policy.value,
        )
        # Under the harness's global seed, how many samples one call draws changes the stream.
        if setting.seed_policy is SeedPolicy.HARNESS:
            fields["samples_per_call"] = setting.samples_per_call
            # Revision 2 of the stream: set_seed, then the one int64 the harness's DataLoader
            # draws before the first generate call. Revision 1 (before reprogrid reproduced that
            # draw) generated from a different stream, so its stored samples must not be reused.
            fields["harness_stream"] = HARNESS_STREAM_REVISION
    return fields


def setting_key(setting: SettingSpec) -> str:
    return sha256_hex(canonical_json(setting_fields(setting)))


def path_keyed(setting: SettingSpec) -> SettingSpec | None:
    """The setting as keyed before local models were named by their content: with the folder's
    path (`repo_id`) in the key. A store written then holds the setting under the key of this
    spec (the driver's plan finds it there: an alias). None for a model keyed by its Hub id,
    whose key never changed."""
    model = setting.engine.model
    if model.identity is None:
        return None
    engine = dataclasses.replace(setting.engine, model=dataclasses.replace(model, identity=None))
    return dataclasses.replace(setting, engine=engine)


def sample_seed(key: str, task_id: str, sample_index: int) -> int:
    """A 63-bit seed for one sample, a pure function of (setting key, task, sample)."""
    digest = hashlib.sha256(f"{key}\x00{task_id}\x00{sample_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


# -- the execution identity ----------------------------------------------------------------------
# A setting key names a generation; the execution key names an outcome: the generation plus
# everything that can change whether a program passes. Changing only the latter re-executes the
# stored generations (never regenerates them, never reuses a stale outcome).
EXECUTION_KEY_VERSION = 1


def execution_fields(
    setting: str, limits: SandboxLimits, environment: Mapping[str, str]
) -> dict[str, Any]:
    """The outcome-relevant fields: the setting key, the sandbox limits a program can hit, and
    the host's environment (isolation level, interpreter, toolchains; see
    Benchmark.execution_environment). Not keyed: `max_output_bytes` (the stored error text's
    length) and `require` (it refuses to run instead of changing an outcome)."""
    return {
        "v": EXECUTION_KEY_VERSION,
        "setting": setting,
        "limits": {
            "timeout_s": float(limits.timeout_s),
            "memory_mb": limits.memory_mb,
            "cpu_s": limits.cpu_s,
            "file_size_mb": limits.file_size_mb,
            "max_processes": limits.max_processes,
            "disk_mb": limits.disk_mb,
            "network": limits.network,
        },
        "environment": dict(environment),
    }


def execution_key(setting: str, limits: SandboxLimits, environment: Mapping[str, str]) -> str:
    return sha256_hex(canonical_json(execution_fields(setting, limits, environment)))


def execution_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two `execution_fields`, as "environment.isolation 'full' ->
    'process'" (the limits as "limit.NAME")."""
    changed = []
    for part, label in (("limits", "limit"), ("environment", "environment")):
        before, after = old.get(part, {}), new.get(part, {})
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                changed.append(f"{label}.{name} {before.get(name)!r} -> {after.get(name)!r}")
    return changed
