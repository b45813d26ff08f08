"""The same grid on the fast path, sized on the same cluster, for `plan` to print beside the
faithful one: the grid's overrides with `backend=auto seed_policy=per_sample` after them
(vLLM where it runs a setting, each sample drawn from its own seed). Those are other setting
keys and other sampled outputs: a choice about what is reproduced, which `plan` only prices."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from orchestrator.run.config.load import load_run_config
from orchestrator.run.estimate.estimator import plan_json
from orchestrator.run.plan.state import make_plan
from orchestrator.run.prepare.prepared import prepare
from storage.store import Store

FAST_OVERRIDES = ("backend=auto", "seed_policy=per_sample")


def fast_path_json(overrides: Sequence[str], keys: Collection[str]) -> dict[str, Any] | None:
    """`plan --json`'s "fast_path": the fast path's wall time and GPU-hours on the cluster the
    plan sizes and the settings it skips; None when the grid (its setting `keys`) is the fast
    path already. A grid the overrides cannot apply to says why (`error`)."""
    try:
        config = load_run_config([*overrides, *FAST_OVERRIDES])
        prepared = prepare(config)
    except ValueError as e:  # ConfigError included: the grid's own axes may forbid them
        return {"overrides": list(FAST_OVERRIDES), "error": str(e)}
    store = Store(config.store)
    plan = make_plan(store, prepared)
    if {i.key for i in plan.settings} == set(keys):
        return None
    data = plan_json(plan, prepared, store)
    cluster = data["cluster"]
    return {
        "overrides": list(FAST_OVERRIDES),
        "gpus": cluster["gpus"],
        "makespan_s": cluster["makespan_s"],
        "gpu_hours": cluster["gpu_hours"],
        "skipped": data["counts"]["skip"],
        "settings": data["n_settings"],
    }
