"""The frozen contract between the driver and the workers.

Everything a worker needs to generate or execute arrives as one of these immutable values; no
`DictConfig`, no environment-variable names, no paths invented on the worker. The orchestrator
builds them once, at the CLI edge (`orchestrator/run/config/`), and the setting key is computed
from them (`workers/keys.py`). The execution side (sandbox jobs, limits, outcomes and records)
is `workers/execspec.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class Dtype(StrEnum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"


class Quant(StrEnum):
    NONE = "none"
    INT8 = "int8"  # bitsandbytes LLM.int8
    INT4 = "int4"  # bitsandbytes 4-bit; the quant type (fp4/nf4) is EngineSpec.bnb_4bit_quant_type


# The precision axis: a label -> (dtype, quant); 8/4-bit load the non-quantised parts in fp16,
# as the harness does.
PRECISIONS: dict[str, tuple[Dtype, Quant]] = {
    "bf16": (Dtype.BF16, Quant.NONE),
    "fp16": (Dtype.FP16, Quant.NONE),
    "fp32": (Dtype.FP32, Quant.NONE),
    "int8": (Dtype.FP16, Quant.INT8),
    "int4": (Dtype.FP16, Quant.INT4),
}


def precision_label(dtype: Dtype, quant: Quant) -> str:
    """The precision axis value of an engine: the quantization if any, else the dtype."""
    return quant.value if quant is not Quant.NONE else dtype.value


class Bnb4bitType(StrEnum):
    FP4 = "fp4"  # the harness default (bitsandbytes default, what `--load_in_4bit` gets)
    NF4 = "nf4"


class LengthSemantics(StrEnum):
    # The BigCode harness's --max_length_generation: prompt tokens + output tokens (HF max_length).
    TOTAL = "total"
    # The limit counts generated tokens only (HF max_new_tokens, vLLM max_tokens).
    NEW_TOKENS = "new_tokens"


class SeedPolicy(StrEnum):
    # One global seed set once per setting, problems generated in order (the harness).
    HARNESS = "harness"
    # A seed per (setting key, task, sample), independent of order and batch composition.
    PER_SAMPLE = "per_sample"


class Tuning(StrEnum):
    BASE = "base"
    INSTRUCT = "instruct"


class Variant(StrEnum):
    TESTS = "tests"  # humanevalfixtests: buggy function without docstring + the unit tests
    DOCS = "docs"  # humanevalfixdocs: buggy function with its docstring, no tests


class StopRule(StrEnum):
    # The harness's Python check_fn: any stop word, or any non-indented non-empty line.
    HARNESS_PYTHON = "harness_python"
    # Stop words (and the tokenizer's eos) only: free-form answers (InfiBench).
    STOP_WORDS = "stop_words"


# ---------------------------------------------------------------------------------------------
# Models and engines


@dataclass(frozen=True)
class ModelSpec:
    name: str  # config name, e.g. "deepseekcoder-1.3b-instruct"; a label, not part of the key
    repo_id: str  # HF repo id, or a local folder
    revision: str  # HF revision (commit); for a local folder a label (a builder's recipe)
    family: str  # "deepseekcoder", "codellama", ...; joins with the literature table
    size_b: float  # parameters in billions
    tuning: Tuning
    own_template: str  # the harness template of the model's family ("deepseek", "codellama", ...)
    num_gpus: int = 1  # GPUs one engine of this model needs (Ray num_gpus)
    trust_remote_code: bool = False
    builder: str | None = None  # "tiny" | "smollm2-gguf": built offline if repo_id is missing
    # What the setting key names the model by instead of `repo_id` (workers/keys.py): a local
    # folder's content, "sha256:<hex>", or the recipe of a folder a builder makes,
    # "builder:<name>" (the driver's prepare/modelid.py). None: a Hub id, keyed as itself. Set
    # by the driver from what the folder holds, never in a model config.
    identity: str | None = None


# The marker a builder writes into the folder it makes: {"recipe": <the model's revision>, ...}.
BUILD_RECIPE_FILE = "reprogrid_recipe.json"


@dataclass(frozen=True)
class BackendOptions:
    """A backend's typed options (each backend subclasses it next to its definition,
    workers/backends/<name>): what its config block sets, bound to one cell."""


@dataclass(frozen=True)
class EngineSpec:
    """A model loaded once by a backend with a dtype and a quantization: one GPU load."""

    model: ModelSpec
    backend: str  # a registry name (workers/backends/registry.py)
    dtype: Dtype
    quant: Quant
    bnb_4bit_quant_type: Bnb4bitType = Bnb4bitType.FP4
    # The backend's own options (its definition's `options_type`); what of them can change an
    # output is keyed through its definition's `key_fields`.
    options: BackendOptions = field(default_factory=BackendOptions)
    # An imported file's generations: the backend they claim to come from (what the setting
    # reproduces: reports line it up with that backend's runs). A label, not keyed: the file's
    # text cannot change with it. None: not stated.
    claimed_backend: str | None = None


# ---------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class DecodingSpec:
    name: str  # "greedy", "t0.2", "t0.8", ...; a label
    do_sample: bool
    temperature: float = 1.0  # ignored when do_sample is False
    top_p: float = 1.0
    top_k: int = 0  # 0 disables top-k (HF semantics)


def select_problems(
    ids: Sequence[str], problems: Sequence[str] | None, limit: int | None
) -> tuple[str, ...]:
    """The task ids of `ids` (benchmark order) that `problems` names (None: all), then the
    first `limit` of them (None: all)."""
    if problems is None:
        return tuple(ids[:limit])
    wanted = set(problems)
    return tuple([i for i in ids if i in wanted][:limit])


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str  # "humanevalfix" | "infibench"
    variant: str  # humanevalfix: "tests" | "docs"; infibench: the suite name ("v2.1")
    data_sha256: str  # hash of the loaded problems (canonical JSON of the rows)
    limit: int | None = None  # first N problems only (None: all)
    # Task ids to cover, in benchmark order (None: all); `limit` then cuts this selection.
    problems: tuple[str, ...] | None = None

    def select(self, ids: Sequence[str]) -> tuple[str, ...]:
        """The task ids this setting covers, in the benchmark's order `ids`."""
        return select_problems(ids, self.problems, self.limit)

    def n_selected(self, n_problems: int) -> int:
        """How many problems it covers of a benchmark of `n_problems` (its `problems` are
        checked against the benchmark's ids before a grid is expanded)."""
        n = len(self.problems) if self.problems is not None else n_problems
        return min(n, self.limit) if self.limit is not None else n


@dataclass(frozen=True)
class SettingSpec:
    """One grid cell: an engine plus prompt, decoding, length, samples and seeding."""

    engine: EngineSpec
    benchmark: BenchmarkSpec
    template: str  # a harness template, or "chat" (the tokenizer's own chat template)
    decoding: DecodingSpec
    max_length: int  # tokens; meaning given by length_semantics
    length_semantics: LengthSemantics = LengthSemantics.TOTAL
    n_samples: int = 1
    samples_per_call: int = 1  # the harness's --batch_size (num_return_sequences)
    seed: int = 0
    seed_policy: SeedPolicy = SeedPolicy.HARNESS

    @property
    def sequential_stream(self) -> bool:
        """Draws from the harness's one global random stream (harness seeding with sampling):
        its samples are generated in order, one chunk at a time, each continuing the stream."""
        return self.decoding.do_sample and self.seed_policy is SeedPolicy.HARNESS


# ---------------------------------------------------------------------------------------------
# Generation requests and results


@dataclass(frozen=True)
class SamplingSpec:
    do_sample: bool
    temperature: float
    top_p: float
    top_k: int
    seed: int | None  # per-request seed; None: draw from the global stream (harness)


@dataclass(frozen=True)
class GenRequest:
    task_id: str
    prompt: str
    n_samples: int
    samples_per_call: int
    sampling: SamplingSpec
    max_length: int
    length_semantics: LengthSemantics
    stop: tuple[str, ...]  # stop strings (the backend adds the tokenizer's eos itself)
    # True for harness templates: the tokenizer adds its special tokens (BOS), as the harness
    # does. False for "chat" prompts, whose template text already carries them.
    add_special_tokens: bool = True
    sample_offset: int = 0  # sample_index of this request's first sample
    stop_rule: StopRule = StopRule.HARNESS_PYTHON


@dataclass(frozen=True)
class Generation:
    task_id: str
    sample_index: int
    continuation: str  # raw model text after the prompt, before post-processing
    # Tokens of the prompt as tokenized (BOS included), before truncation, and of the output;
    # None: not known (replayed continuations were not tokenized here).
    n_prompt_tokens: int | None
    n_output_tokens: int | None
    prompt_truncated: bool  # prompt >= the length limit: left-truncated, cannot be solved
    hit_length_limit: bool  # generation ended because the length limit was reached
    output_token_ids: tuple[int, ...] = ()
    # The decoded text does not start with the prompt, so the harness's character slice at
    # len(prompt) is misaligned (e.g. a BOS that is also chat-template text gets dropped).
    decode_mismatch: bool = False


@dataclass(frozen=True)
class EngineInfo:
    """What the backend actually loaded: recorded next to what was requested."""

    backend: str  # the registry name
    # library -> version the engine generated with; its own library under its definition's
    # `export_name` (hf: transformers, vllm: vllm), the version an export names. Empty: no
    # library generated (replayed or fake text).
    backend_versions: dict[str, str]
    device: str | None  # None: no device ran a model (replayed or imported generations)
    effective_dtype: str
    model_revision: str
    tokenizer_sha256: str | None  # hash of the tokenizer's vocabulary; None: no tokenizer
    chat_template_sha256: str | None
    eos_token: str | None
    options: dict[str, str]  # effective backend options (JSON-native strings)


# ---------------------------------------------------------------------------------------------
# What a worker returns to the driver (the driver turns these into Parquet rows)


@dataclass(frozen=True)
class SampleRecord:
    task_id: str
    sample_index: int
    prompt: str
    continuation: str
    program: str  # the post-processed candidate (HumanEvalFix) or trimmed response (InfiBench)
    n_prompt_tokens: int | None  # None: not known (see Generation)
    n_output_tokens: int | None
    prompt_truncated: bool
    hit_length_limit: bool
    output_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    decode_mismatch: bool = False


@dataclass(frozen=True)
class WorkerInfo:
    hostname: str
    node_id: str  # Ray node id, "" outside Ray
    pid: int | None  # None: no worker process generated (imported generations)


@dataclass(frozen=True)
class SettingGenerations:
    setting_key: str
    samples: tuple[SampleRecord, ...]
    engine_info: EngineInfo
    worker: WorkerInfo
    # Seconds; None: not measured (imported generations: nothing was generated here).
    generation_s: float | None
    engine_load_s: float | None
    started_at: float = 0.0  # epoch seconds (worker clock): when this setting's generation began
    finished_at: float = 0.0
    chunk: int | None = None  # the chunk these samples are (None: the whole setting at once)
    # The global random stream after the chunk, for a setting that draws from it (harness
    # seeding with sampling): the next chunk continues from it, in this process or a resumed one.
    stream_state: bytes | None = None


@dataclass(frozen=True)
class ChunkRequest:
    """Part of a setting to generate: some of its problems, in benchmark order. Chunks are the
    unit of commit: the driver stores each as it comes back, so a killed run loses at most the
    chunks in flight."""

    setting_key: str
    setting: SettingSpec
    chunk: int  # index of the chunk (its shard is `<setting_key>~<chunk>`)
    task_ids: tuple[str, ...]  # the problems, in benchmark order
    # Harness seeding with sampling: the setting's first chunk seeds the global stream; a later
    # one continues from the stream state the previous chunk returned (None: this process
    # continues its own stream, the previous chunk having run here).
    first: bool = True
    stream_state: bytes | None = None


@dataclass(frozen=True)
class SettingFailure:
    setting_key: str
    error_type: str
    error_message: str
