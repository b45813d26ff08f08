"""What the benchmark adapters share around generation: the requests for one problem under a
setting's seed policy, and the sample records made from what the backend returned."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from workers.keys import sample_seed
from workers.spec import (
    Generation,
    GenRequest,
    SampleRecord,
    SamplingSpec,
    SeedPolicy,
    SettingSpec,
    StopRule,
)


def problem_requests(
    setting: SettingSpec,
    key: str,
    task_id: str,
    prompt: str,
    stop: tuple[str, ...],
    *,
    add_special_tokens: bool,
    stop_rule: StopRule = StopRule.HARNESS_PYTHON,
) -> list[GenRequest]:
    """One request drawing all n samples from the global stream (the harness's seeding, and
    greedy), or, under seed_policy=per_sample with sampling, one request per sample with the
    seed derived from (setting key, task, sample): independent of order and batching."""
    d = setting.decoding
    template = GenRequest(
        task_id=task_id,
        prompt=prompt,
        n_samples=setting.n_samples,
        samples_per_call=setting.samples_per_call,
        sampling=SamplingSpec(d.do_sample, d.temperature, d.top_p, d.top_k, None),
        max_length=setting.max_length,
        length_semantics=setting.length_semantics,
        stop=stop,
        add_special_tokens=add_special_tokens,
        stop_rule=stop_rule,
    )
    if not (setting.seed_policy is SeedPolicy.PER_SAMPLE and d.do_sample):
        return [template]
    return [
        replace(
            template,
            n_samples=1,
            samples_per_call=1,
            sampling=replace(template.sampling, seed=sample_seed(key, task_id, index)),
            sample_offset=index,
        )
        for index in range(setting.n_samples)
    ]


def sample_records(
    requests: Sequence[GenRequest],
    generations: Sequence[Generation],
    program: Callable[[Generation], str],
) -> tuple[SampleRecord, ...]:
    """One record per generation: its request's prompt and seed, the raw continuation, and
    `program(generation)` (the benchmark's post-processing) as what gets scored."""
    prompts = {r.task_id: r.prompt for r in requests}
    seeds = {(r.task_id, r.sample_offset): r.sampling.seed for r in requests}
    return tuple(
        SampleRecord(
            task_id=g.task_id,
            sample_index=g.sample_index,
            prompt=prompts[g.task_id],
            continuation=g.continuation,
            program=program(g),
            n_prompt_tokens=g.n_prompt_tokens,
            n_output_tokens=g.n_output_tokens,
            prompt_truncated=g.prompt_truncated,
            hit_length_limit=g.hit_length_limit,
            output_token_ids=g.output_token_ids,
            seed=seeds.get((g.task_id, g.sample_index)),
            decode_mismatch=g.decode_mismatch,
        )
        for g in generations
    )
