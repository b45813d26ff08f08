"""vLLM vs transformers on one engine's 12 settings, and reprogrid's overhead over bare vLLM.

For each model: the `engine12` grid (2 templates x 3 decodings x 2 lengths) on the first
--limit HumanEvalFix problems, generated
  - through the transformers backend in faithful mode (one prompt per call, the harness's seed
    policy), one setting after the other, as a unit's worker does;
  - through the vLLM backend (seed_policy=per_sample), all 12 settings in one call;
each in a fresh process (`EngineSession.run`: prompts, tokenization, generation, harness
stopping and post-processing; engine load reported apart). Then, in the vLLM process, the
same prompts through a bare `LLM.generate` with the same sampling parameters and exactly the
number of tokens reprogrid generated per sequence (ignore_eos, no stop strings): reprogrid's
tokens/s over bare tokens/s is the orchestration overhead. With --repeats N both are timed N
times, alternating, with the prefix cache reset before each run; the fastest run counts.

    python perf/backends.py                                    # tiny + smollm2-135m
    python perf/backends.py --models tiny --limit 40 --threads 1

Models are built on first use in REPROGRID_CACHE_DIR (default ~/.cache/reprogrid); data from
REPROGRID_DATA_DIR. --threads sets the CPU threads of both backends (OMP_NUM_THREADS).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _unit(model: str, limit: int, backend: str):
    """The benchmark's settings: engine12 for `model` on `limit` problems, as one unit."""
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.plan.planner import unit_engine
    from orchestrator.run.prepare.prepared import prepare

    policy = "per_sample" if backend == "vllm" else "harness"
    overrides = [
        f"model={model}",
        "grid=engine12",
        f"benchmark.limit={limit}",
        f"backend={backend}",
        f"seed_policy={policy}",
        "dtype=fp32",
    ]
    prepared = prepare(load_run_config(overrides))
    cells = [c for c in prepared.cells if not c.skipped]
    engine = unit_engine(cells[0].setting.engine, [c.setting for c in cells])
    return prepared.benchmark, engine, [(c.key, c.setting) for c in cells]


def _session_run(session, items) -> tuple[float, list]:
    """Wall seconds of `EngineSession.run` over the unit, and its results."""
    reset = getattr(getattr(session.backend, "llm", None), "reset_prefix_cache", None)
    if reset is not None:
        reset()
    started = time.perf_counter()
    results = session.run_settings(items)
    wall = time.perf_counter() - started
    failed = [r for r in results if not hasattr(r, "samples")]
    if failed:
        raise RuntimeError(f"settings failed: {failed}")
    return wall, results


def _bare_run(backend, adapter, items, results) -> tuple[float, int]:
    """The same prompts, sampling and token counts through LLM.generate, nothing else."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    counts = {
        (r.setting_key, s.task_id, s.sample_index): s.n_output_tokens
        for r in results
        for s in r.samples
    }
    prompts, params = [], []
    for key, setting in items:
        for request in adapter.requests(setting, key, backend.render_chat):
            prep = backend.prepare(request)
            n = counts[(key, request.task_id, request.sample_offset)]
            if prep.max_tokens == 0 or n == 0:
                continue
            s = request.sampling
            sampling = (
                dict(temperature=s.temperature, top_p=s.top_p, seed=s.seed)
                if s.do_sample
                else dict(temperature=0.0)
            )
            prompts.append(TokensPrompt(prompt_token_ids=list(prep.ids)))
            params.append(SamplingParams(max_tokens=n, min_tokens=n, ignore_eos=True, **sampling))
    backend.llm.reset_prefix_cache()
    started = time.perf_counter()
    outputs = backend.llm.generate(prompts, params, use_tqdm=False)
    return time.perf_counter() - started, sum(len(o.outputs[0].token_ids) for o in outputs)


def child(args) -> None:
    """One backend in this process; writes its measurements as JSON to args.out."""
    if args.backend == "hf":
        import torch

        torch.set_num_threads(args.threads)
    from workers.session import EngineSession

    adapter, engine, items = _unit(args.model, args.limit, args.backend)
    session = EngineSession(engine, {adapter.name: adapter})
    ours, bare = [], []
    for _ in range(1 if args.backend == "hf" else args.repeats):  # alternate: ours, bare, ...
        wall, results = _session_run(session, items)
        ours.append(wall)
        if args.backend == "vllm":
            bare.append(_bare_run(session.backend, adapter, items, results))
    samples = [s for r in results for s in r.samples]
    result = {
        "load_s": session.load_s,
        "settings": len(items),
        "samples": len(samples),
        "tokens": sum(s.n_output_tokens for s in samples),
        "wall_s": min(ours),
    }
    if bare:
        result.update(bare_wall_s=min(b[0] for b in bare), bare_tokens=bare[0][1])
    session.close()
    Path(args.out).write_text(json.dumps(result))


def run_child(backend: str, model: str, args) -> dict:
    out = Path(tempfile.mkdtemp(prefix="reprogrid-bench-")) / f"{backend}.json"
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    cmd = [
        sys.executable,
        __file__,
        "--child",
        backend,
        "--models",
        model,
        "--limit",
        str(args.limit),
        "--threads",
        str(args.threads),
        "--repeats",
        str(args.repeats),
        "--out",
        str(out),
    ]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument(
        "--models",
        default="tiny,smollm2-135m",
        help="comma list of model configs (default: tiny,smollm2-135m)",
    )
    parser.add_argument("--limit", type=int, default=5, help="problems per setting (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per backend")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="vLLM runs (each followed by a bare run); the fastest counts",
    )
    parser.add_argument("--skip-hf", action="store_true", help="vLLM and its overhead only")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.add_argument("--child", choices=["hf", "vllm"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.backend, args.model = args.child, args.models
        child(args)
        return

    rows = []
    for model in args.models.split(","):
        vllm = run_child("vllm", model, args)
        hf = None if args.skip_hf else run_child("hf", model, args)
        rows.append({"model": model, "vllm": vllm, "hf": hf})
    if args.json:
        _out(json.dumps(rows, indent=2))
        return
    _out(
        f"engine12 (12 settings) x {args.limit} problems, fp32, CPU, {args.threads} thread(s) "
        f"per backend, {os.cpu_count()} cores"
    )
    _out(
        f"{'model':14s} {'backend':8s} {'samples':>7s} {'tokens':>7s} {'load_s':>7s} "
        f"{'wall_s':>7s} {'tok/s':>8s} {'vllm/hf':>8s}"
    )
    for row in rows:
        v = row["vllm"]
        for name, m in (("hf", row["hf"]), ("vllm", v)):
            if m is None:
                continue
            speed = m["tokens"] / m["wall_s"]
            ratio = ""
            if name == "vllm" and row["hf"]:
                hf_speed = row["hf"]["tokens"] / row["hf"]["wall_s"]
                ratio = f"x{speed / hf_speed:.1f}"
            _out(
                f"{row['model']:14s} {name:8s} {m['samples']:7d} {m['tokens']:7d} "
                f"{m['load_s']:7.1f} {m['wall_s']:7.1f} {speed:8.0f} {ratio:>8s}"
            )
    _out()
    _out(
        f"{'model':14s} {'reprogrid tok/s':>16s} {'bare LLM.generate tok/s':>24s} "
        f"{'ratio':>6s} {'overhead':>9s}"
    )
    for row in rows:
        v = row["vllm"]
        ours, bare = v["tokens"] / v["wall_s"], v["bare_tokens"] / v["bare_wall_s"]
        _out(
            f"{row['model']:14s} {ours:16.0f} {bare:24.0f} {ours / bare:6.2f} "
            f"{100 * (bare / ours - 1):8.1f}%"
        )


if __name__ == "__main__":
    main()
