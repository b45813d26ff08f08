"""The transformers backend's CUDA paths on the tiny model: every precision of the study's grid,
generation time and output agreement with fp32. A check for a GPU machine, not a test.

    python perf/gpu_paths.py --prompts 32
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# This checkout's packages first (Python puts the script's folder, perf/, on the path, not the
# repository root): the script measures the code it sits in, whichever checkout is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.backends.hf import HfOptions
from workers.spec import (
    Dtype,
    EngineSpec,
    GenRequest,
    LengthSemantics,
    ModelSpec,
    Quant,
    SamplingSpec,
    Tuning,
)

PRECISIONS = {
    "fp32": (Dtype.FP32, Quant.NONE),
    "bf16": (Dtype.BF16, Quant.NONE),
    "fp16": (Dtype.FP16, Quant.NONE),
    "int8": (Dtype.FP16, Quant.INT8),
    "int4": (Dtype.FP16, Quant.INT4),
}
STOP = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert", "<|endoftext|>")


def prompts(n: int) -> list[str]:
    names = ["add", "is_even", "reverse", "flatten", "count_words", "median", "gcd", "merge"]
    return [f"def {names[i % len(names)]}_{i}(x, y):\n    " for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    args = parser.parse_args()
    # torch comes in only now, so that `--help` works on a machine without it (the driver tier).
    from workers.backends.hf.engine import HfBackend
    from workers.backends.modelprep import build_tiny_model

    folder = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    model = ModelSpec("tiny", str(folder), "tiny-llama-v1", "tiny", 0.0003, Tuning.INSTRUCT, "yi")
    greedy = SamplingSpec(False, 1.0, 1.0, 0, None)
    requests = [
        GenRequest(f"T/{i}", p, 1, 1, greedy, args.max_length, LengthSemantics.TOTAL, STOP)
        for i, p in enumerate(prompts(args.prompts))
    ]
    reference = None
    print(
        f"{'precision':9s} {'device':28s} {'dtype':9s} {'load_s':>7s} {'gen_s':>7s} "
        f"{'tokens':>7s} {'same as fp32':>13s}"
    )
    for label, (dtype, quant) in PRECISIONS.items():
        backend = HfBackend()
        started = time.perf_counter()
        info = backend.load(EngineSpec(model, "hf", dtype, quant, options=HfOptions("cuda")))
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        out = backend.generate(requests, global_seed=0)
        gen_s = time.perf_counter() - started
        backend.close()
        texts = [g.continuation for g in out]
        reference = reference or texts
        same = sum(a == b for a, b in zip(reference, texts, strict=True))
        tokens = sum(g.n_output_tokens for g in out)
        print(
            f"{label:9s} {info.device:28s} {info.effective_dtype:9s} {load_s:7.2f} {gen_s:7.2f} "
            f"{tokens:7d} {same:>6d}/{len(texts)}"
        )


if __name__ == "__main__":
    main()
