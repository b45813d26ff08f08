"""CUDA paths of the transformers backend (and vLLM's GPU build): skipped without a GPU.

Run on a GPU machine with `python -m pytest -m gpu tests/gpu`."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

from workers.backends.hf import HfOptions  # noqa: E402
from workers.backends.hf.engine import HfBackend  # noqa: E402
from workers.backends.modelprep import build_tiny_model  # noqa: E402
from workers.spec import (  # noqa: E402
    Dtype,
    EngineSpec,
    GenRequest,
    LengthSemantics,
    ModelSpec,
    Quant,
    SamplingSpec,
    Tuning,
)

GREEDY = SamplingSpec(False, 1.0, 1.0, 0, None)
STOP = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert", "<|endoftext|>")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny")
    return ModelSpec("tiny", str(path), "tiny-llama-v1", "tiny", 0.0003, Tuning.INSTRUCT, "yi")


def generate(model, dtype, quant, prompts):
    backend = HfBackend()
    engine = EngineSpec(model, "hf", dtype, quant, options=HfOptions(device="cuda"))
    info = backend.load(engine)
    requests = [
        GenRequest(f"T/{i}", p, 1, 1, GREEDY, 128, LengthSemantics.TOTAL, STOP)
        for i, p in enumerate(prompts)
    ]
    out = backend.generate(requests)
    backend.close()
    return info, out


PROMPTS = ["def add(a, b):", "def is_even(n):\n    ", "class Stack:\n    def push(self, x):"]


@pytest.mark.parametrize(
    ("dtype", "quant", "effective"),
    [
        (Dtype.FP32, Quant.NONE, "float32"),
        (Dtype.BF16, Quant.NONE, "bfloat16"),
        (Dtype.FP16, Quant.NONE, "float16"),
        (Dtype.FP16, Quant.INT8, "float16"),
        (Dtype.FP16, Quant.INT4, "float16"),
    ],
)
def test_hf_backend_generates_on_cuda(tiny, dtype, quant, effective):
    info, out = generate(tiny, dtype, quant, PROMPTS)
    assert info.device.startswith("cuda:")
    assert info.effective_dtype in (effective, "int8", "uint8")
    assert len(out) == len(PROMPTS) and all(g.n_output_tokens >= 0 for g in out)
    assert not any(g.decode_mismatch for g in out)


def test_cuda_fp32_greedy_is_deterministic(tiny):
    _, first = generate(tiny, Dtype.FP32, Quant.NONE, PROMPTS)
    _, second = generate(tiny, Dtype.FP32, Quant.NONE, PROMPTS)
    assert first == second


def test_bitsandbytes_4bit_uses_the_harness_fp4_with_fp16_compute(tiny):
    backend = HfBackend()
    backend.load(EngineSpec(tiny, "hf", Dtype.FP16, Quant.INT4, options=HfOptions("cuda")))
    config = backend.model.config.quantization_config
    assert config.bnb_4bit_quant_type == "fp4"
    assert config.bnb_4bit_compute_dtype == torch.float16
    assert not config.bnb_4bit_use_double_quant
    backend.close()
