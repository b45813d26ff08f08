"""The BigCode harness's sampling loop, written in the tests the way the harness runs it: the
oracle for reprogrid's `seed_policy=harness`. Test code only (needs accelerate).

What it follows (bigcode-evaluation-harness, `bigcode_eval/generation.py` and `utils.py`):
`parallel_generations` calls `set_seed(args.seed, device_specific=True)`, builds a
`TokenizedDataset` (an IterableDataset: every prompt tokenized at once with truncation and
padding to the length limit, each prompt's row yielded `n_copies = ceil(n_samples /
batch_size)` times in a row), wraps `DataLoader(ds, batch_size=1)` with
`accelerator.prepare`, and `complete_code` iterates it: per batch it slices the padding off,
sets the stopping criterion's start length, calls `generate(num_return_sequences=batch_size)`
(catching "input length == max_length" and returning the input), pads and gathers across
processes, and appends each row to its task.

Also the problems the seeding tests share (tests/unit/workers/backends/test_harness_seeding.py
on CPU, tests/gpu/test_harness_seeding_cuda.py on CUDA) and how reprogrid's side is read.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import transformers
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, IterableDataset

from workers.backends.hf.engine import EndOfFunctionCriteria
from workers.spec import GenRequest, LengthSemantics, SamplingSpec

STOP = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\nassert", "<|endoftext|>")
SAMPLED = SamplingSpec(True, 0.8, 0.95, 0, None)  # seed None: the global stream
MAX_LENGTH = 48
PROMPTS = [
    "def add(a, b):\n",
    "class Stack:\n    def push(self, x):",
    "".join(f"x{i} = {i}\n" for i in range(60)),  # over the limit: truncated, not generated
    "def is_even(n):\n    ",
]
AT_THE_LIMIT = 2
# (n_samples, samples_per_call): n_copies = ceil(n / per_call) calls per problem, the extra
# samples of the last call dropped
LAYOUTS = [(1, 1), (4, 1), (4, 2), (5, 2), (3, 3)]


class CopiesDataset(IterableDataset):
    """The harness's TokenizedDataset for plain-string prompts."""

    def __init__(self, tokenizer, prompts: Sequence[str], max_length: int, n_copies: int):
        self.tokenizer = tokenizer
        self.prompts = list(prompts)
        self.max_length = max_length
        self.n_copies = n_copies

    def __iter__(self):
        outputs = self.tokenizer(
            self.prompts,
            padding=True,
            truncation=True,
            return_tensors="pt",
            max_length=self.max_length,
        )
        for task in range(len(self.prompts)):
            for _ in range(self.n_copies):
                yield {
                    "ids": outputs.input_ids[task],
                    "task_id": task,
                    "input_len": outputs.attention_mask[task].sum(),
                }


def run_harness(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    seed: int,
    n_samples: int,
    batch_size: int,
    gen_kwargs: dict[str, Any],
    on_first_batch: Callable[[], None] | None = None,
) -> list[list[list[int]]]:
    """Every task's sequences (prompt + output ids, as generate returns them), the first
    `n_samples` of each as the harness keeps them. `gen_kwargs` holds the harness's
    `do_sample`, `temperature`, `top_p`, `top_k`, `max_length` and `stopping_criteria` (its
    first criterion gets the batch's start length, as in complete_code). `on_first_batch` is
    called when the first batch has arrived, just before the first generate call."""
    accelerator = Accelerator()
    set_seed(seed, device_specific=True)
    n_copies = math.ceil(n_samples / batch_size)
    dataset = CopiesDataset(tokenizer, prompts, gen_kwargs["max_length"], n_copies)
    model = model.to(accelerator.device)
    loader = accelerator.prepare(DataLoader(dataset, batch_size=1))
    rows: dict[int, list[list[int]]] = defaultdict(list)
    for step, batch in enumerate(loader):
        if step == 0 and on_first_batch is not None:
            on_first_batch()
        with torch.no_grad():
            inputs = batch["ids"][:, : batch["input_len"]]
            if "stopping_criteria" in gen_kwargs:
                gen_kwargs["stopping_criteria"][0].start_length = batch["input_len"].max().item()
            refused = (
                f"Input length of input_ids is {inputs.shape[1]}, but `max_length` is set to "
                f"{gen_kwargs['max_length']}"
            )
            try:
                generated = model.generate(
                    input_ids=inputs, num_return_sequences=batch_size, **gen_kwargs
                )
            except ValueError as e:
                if not str(e).startswith(refused):
                    raise
                generated = inputs  # one row, whatever batch_size is (the harness's own quirk)
            tasks = batch["task_id"].repeat(batch_size)
            generated = accelerator.pad_across_processes(
                generated, dim=1, pad_index=tokenizer.pad_token_id
            )
            generated, tasks = accelerator.gather((generated, tasks))
            for task, row in zip(tasks.cpu().tolist(), generated.cpu().tolist(), strict=False):
                rows[task].append(row)
    return [rows[task][:n_samples] for task in range(len(prompts))]


def rng_snapshot() -> tuple:
    """The global random states the harness seeds: Python, NumPy, torch CPU (and CUDA)."""
    np_state = np.random.get_state()
    cuda = (
        tuple(bytes(s.numpy()) for s in torch.cuda.get_rng_state_all())
        if torch.cuda.is_available()
        else ()
    )
    return (
        random.getstate(),
        (np_state[0], np_state[1].tobytes(), *np_state[2:]),
        bytes(torch.get_rng_state().numpy()),
        cuda,
    )


# -- the same problems through reprogrid -------------------------------------------------------


def harness_requests(
    n_samples: int, per_call: int, sampling: SamplingSpec = SAMPLED
) -> list[GenRequest]:
    """PROMPTS as reprogrid's harness-seeded requests (seed None: the global stream)."""
    return [
        GenRequest(
            f"T/{i}", p, n_samples, per_call, sampling, MAX_LENGTH, LengthSemantics.TOTAL, STOP
        )
        for i, p in enumerate(PROMPTS)
    ]


def harness_kwargs(tokenizer, sampling: SamplingSpec = SAMPLED) -> dict:
    """`parallel_generations`' gen_kwargs: stop words with the tokenizer's eos appended."""
    criterion = EndOfFunctionCriteria(0, [*STOP, tokenizer.eos_token], tokenizer)
    return {
        "do_sample": sampling.do_sample,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "max_length": MAX_LENGTH,
        "stopping_criteria": transformers.StoppingCriteriaList([criterion]),
    }


class Recorder:
    """Wraps a generate function and snapshots the global random states at every call that
    generates (not at the harness's calls that generate refuses: the prompt is at the limit)."""

    def __init__(self, generate):
        self.generate = generate
        self.states: list[tuple] = []

    def __call__(self, *args, **kwargs):
        input_ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        if input_ids.shape[1] < kwargs.get("max_length", float("inf")):
            self.states.append(rng_snapshot())
        return self.generate(*args, **kwargs)


def backend_rows(backend, reqs, generations) -> list[list[list[int]]]:
    """Per request, each sample as prompt ids + output ids (what generate returned)."""
    out: list[list[list[int]]] = [[] for _ in reqs]
    index = {r.task_id: i for i, r in enumerate(reqs)}
    for g in generations:
        request = reqs[index[g.task_id]]
        ids = backend.tokenizer(request.prompt, truncation=True, max_length=MAX_LENGTH).input_ids
        out[index[g.task_id]].append(list(ids) + list(g.output_token_ids))
    return out


def assert_rows_match(ours, theirs, n_samples: int) -> None:
    """reprogrid's samples (backend_rows) equal the harness loop's (run_harness), problem by
    problem; for the prompt at the limit every copy is the (truncated) input."""
    for task, (mine, harness) in enumerate(zip(ours, theirs, strict=True)):
        if task == AT_THE_LIMIT:
            # The harness keeps one row per refused call (its quirk); every copy is the input.
            assert len(mine) == n_samples and len({tuple(r) for r in mine + harness}) == 1
            assert all(len(r) == MAX_LENGTH for r in mine)
            continue
        assert mine == harness, f"task {task}: samples differ from the harness loop"
