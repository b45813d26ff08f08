"""Arrow schemas of the store's tables. Column names are the project's vocabulary (model,
engine, setting, problem, sample, execution, score: README.md).

Every table is a folder of Parquet shards, one shard per setting key (or run id), all with the
table's schema, so `pandas.read_parquet(store / table)` reads the whole table.
"""

from __future__ import annotations

from enum import StrEnum

import pyarrow as pa

# 2: a setting's run-time facts; 3: the problem selection; 4: an import's claimed backend;
# 5: the benchmark card of a setting and the exact counts behind a score; 6: a setting's
# provenance as structured values; 7: what a cluster did to a run (the columns added are marked
# "2" to "7")
SCHEMA_VERSION = "7"


class SettingStatus(StrEnum):
    """Where a setting stands in the store (`pending` is never stored: it means "no row")."""

    COMPLETE = "complete"
    QUEUED = "queued"  # submitted by a live run, its generation or execution not begun yet
    RUNNING = "running"  # generating or executing (written when its first work is handed out)
    FAILED = "failed"
    SKIPPED = "skipped"
    PENDING = "pending"


class RunStatus(StrEnum):
    """A run (one invocation of a writing command) in the `runs` table."""

    RUNNING = "running"  # its process holds the writer lock (or died: shown as interrupted)
    FINISHED = "finished"  # it ran to the end (its grid may still hold failed settings)
    INTERRUPTED = "interrupted"  # stopped by a signal, or found dead by the next writer
    FAILED = "failed"  # the run itself could not go on (e.g. the cluster was unreachable)


_str = pa.string()
_dict = pa.dictionary(pa.int32(), pa.string())  # closed sets (enums) as dictionary strings
# A column added after the first schema version carries this field metadata: a shard written
# before it lacks the column, which reads as null (and the writer upgrades such shards).
ADDED_IN = b"reprogrid.added_in"


def _added(name: str, kind: pa.DataType, version: str) -> pa.Field:
    return pa.field(name, kind, metadata={ADDED_IN: version.encode()})


def optional_columns(schema: pa.Schema) -> frozenset[str]:
    """Columns an older shard of this table may lack (added in a later schema version)."""
    return frozenset(f.name for f in schema if f.metadata and ADDED_IN in f.metadata)


# One row per setting: every field of the setting, its status, and provenance once run.
SETTINGS = pa.schema(
    [
        ("setting_key", _str),
        ("engine_key", _str),
        ("status", _dict),  # SettingStatus
        ("status_reason", _str),  # skip reason, or the last error of a failed setting
        ("error_type", _str),
        ("attempts", pa.int32()),
        ("run_id", _str),
        ("updated_at", pa.timestamp("us", tz="UTC")),
        ("model_name", _str),
        ("model_repo_id", _str),
        ("model_revision", _str),
        ("model_family", _str),
        ("model_size_b", pa.float64()),
        ("model_tuning", _dict),
        ("backend", _dict),
        # An imported file's claim (import-generations): the backend its generations come from;
        # `backend` stays `replay`, the provenance. Null: a generated setting (or no claim).
        _added("claimed_backend", _str, "4"),
        ("dtype", _dict),
        ("quant", _dict),
        ("bnb_4bit_quant_type", _str),
        ("precision", _str),
        ("benchmark", _str),
        ("variant", _str),
        ("data_sha256", _str),
        ("limit", pa.int32()),
        _added("problems", _str, "3"),  # benchmark.problems: task ids, comma-joined (null: all)
        # Facts fixed at run time so that a report needs nothing but the store: problems the
        # setting covers and the benchmark's total (fewer: a pilot), the template kind (own /
        # instruct / chat / ...) and the model's own template.
        _added("n_problems", pa.int32(), "2"),
        _added("benchmark_n_problems", pa.int32(), "2"),
        ("template", _str),
        _added("template_kind", _str, "2"),
        _added("model_own_template", _str, "2"),
        # The benchmark's card (workers/card.py, canonical JSON): its dataset, headline metric
        # and scale, literature, and how a reported value is matched; what the report reads
        # instead of knowing any benchmark by name.
        _added("benchmark_card_json", _str, "5"),
        ("decoding", _str),
        ("do_sample", pa.bool_()),
        ("temperature", pa.float64()),
        ("top_p", pa.float64()),
        ("top_k", pa.int32()),
        ("max_length", pa.int32()),
        ("length_semantics", _dict),
        ("n_samples", pa.int32()),
        ("samples_per_call", pa.int32()),
        ("seed", pa.int64()),
        ("seed_policy", _dict),
        ("setting_json", _str),  # canonical JSON of the keyed fields
        # The execution identity of the stored executions (workers/keys.py execution_key) and
        # its fields: when today's limits or environment give another key, the stored
        # generations are executed again.
        _added("execution_key", _str, "2"),
        _added("execution_json", _str, "2"),
        # provenance, filled when the setting has been generated. Its engine as structured
        # values (storage/provenance.py reads them, and the flat columns of older rows): every
        # library it generated with, {library: [version, ...]} (canonical JSON), and every
        # host, Ray node, device and effective dtype its chunks ran on. The flat columns hold
        # their readable text ("torch 2.13.0+cpu, transformers 5.19.0"; values joined with
        # ", "), for display only.
        ("hostname", _str),
        ("node_id", _str),
        ("device", _str),
        ("backend_version", _str),
        ("effective_dtype", _str),
        _added("backend_versions_json", _str, "6"),
        _added("hostnames", pa.list_(_str), "6"),
        _added("node_ids", pa.list_(_str), "6"),
        _added("devices", pa.list_(_str), "6"),
        _added("effective_dtypes", pa.list_(_str), "6"),
        ("tokenizer_sha256", _str),
        ("chat_template_sha256", _str),
        ("engine_options_json", _str),
        ("library_versions_json", _str),
        ("generation_s", pa.float64()),
        ("generation_started_at", pa.timestamp("us", tz="UTC")),
        ("generation_finished_at", pa.timestamp("us", tz="UTC")),
        ("engine_load_s", pa.float64()),
        ("n_generated_tokens", pa.int64()),
    ]
)

GENERATIONS = pa.schema(
    [
        ("setting_key", _str),
        ("task_id", _str),
        ("sample_index", pa.int32()),
        ("prompt", _str),
        ("continuation", _str),  # raw text after the prompt
        ("program", _str),  # post-processed candidate, as scored
        ("n_prompt_tokens", pa.int32()),
        ("n_output_tokens", pa.int32()),
        ("prompt_truncated", pa.bool_()),
        ("hit_length_limit", pa.bool_()),
        ("output_token_ids", pa.list_(pa.int32())),
        ("decode_mismatch", pa.bool_()),  # harness slice misaligned (see workers/spec.py)
        ("seed", pa.int64()),  # per-sample seed, null under the harness's global seed
        # The harness's global random stream after this sample: set on the last row of each
        # committed chunk of a setting that draws from it, so a resumed run continues the
        # stream exactly (workers/backends: JSON of the RNG states; null otherwise).
        _added("stream_state", pa.binary(), "2"),
    ]
)

EXECUTIONS = pa.schema(
    [
        ("setting_key", _str),
        ("task_id", _str),
        ("sample_index", pa.int32()),
        ("outcome", _dict),  # Outcome
        ("passed", pa.bool_()),
        ("score", pa.float64()),  # 1.0/0.0 for unit tests; InfiBench's graded score
        ("error_type", _str),
        ("error_message", _str),
        ("duration_s", pa.float64()),
        ("details", _str),  # JSON: metric breakdown (InfiBench), null otherwise
        _added("isolation", _dict, "2"),  # the sandbox's IsolationLevel for this run
    ]
)

SCORES = pa.schema(
    [
        ("setting_key", _str),
        ("benchmark", _str),
        ("metric", _str),  # "pass@1" (HumanEvalFix) or "best@10" (InfiBench)
        ("value", pa.float64()),  # the headline metric, a fraction in [0, 1]
        ("value_std", pa.float64()),  # its std over sample groups (best@k), else null
        ("n_problems", pa.int32()),
        ("n_samples", pa.int32()),
        ("n_passed", pa.int32()),  # samples that passed
        # The exact counts behind the score (workers/scoring.py), so that no reader
        # reconstructs a fraction: samples scored, pass@1 as numerator / denominator (with m
        # samples per problem: n_passed / (problems x m)), and per problem (sorted task ids)
        # its samples, passing samples and part of the headline (pass@1: c/n; best@k: the mean
        # of its group bests). Null in rows written before version 5 (the report derives them
        # from the executions: orchestrator/report/tables/scored.py).
        _added("n_scored", pa.int32(), "5"),
        _added("pass_at_1_numerator", pa.int64(), "5"),
        _added("pass_at_1_denominator", pa.int64(), "5"),
        _added("problem_ids", pa.list_(_str), "5"),
        _added("problem_n_samples", pa.list_(pa.int32()), "5"),
        _added("problem_n_passed", pa.list_(pa.int32()), "5"),
        _added("problem_scores", pa.list_(pa.float64()), "5"),
        ("pass_at_1", pa.float64()),
        ("pass_at_10", pa.float64()),  # null unless every problem has n >= 10
        ("pass_at_100", pa.float64()),
        ("n_prompt_truncated", pa.int32()),
        ("n_hit_length_limit", pa.int32()),
        ("n_decode_mismatch", pa.int32()),
        ("n_timeout", pa.int32()),
        ("n_unscorable", pa.int32()),  # e.g. InfiBench questions whose toolchain is missing
        ("details", _str),  # JSON: per-language/type breakdowns
        # a copy of the setting's fields so the table reads on its own
        ("model_name", _str),
        ("model_family", _str),
        ("model_size_b", pa.float64()),
        ("model_tuning", _str),
        ("backend", _str),
        ("dtype", _str),
        ("quant", _str),
        ("precision", _str),
        ("variant", _str),
        ("template", _str),
        ("decoding", _str),
        ("temperature", pa.float64()),
        ("max_length", pa.int32()),
        ("length_semantics", _str),
        ("seed", pa.int64()),
        # the problem selection: `n_problems` above counts what it selected
        _added("limit", pa.int32(), "3"),
        _added("problems", _str, "3"),
    ]
)

# One row per invocation of a command that writes: the run manifest.
RUNS = pa.schema(
    [
        ("run_id", _str),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("finished_at", pa.timestamp("us", tz="UTC")),
        ("command", _str),
        ("overrides_json", _str),
        ("setting_keys", pa.list_(_str)),
        ("n_generated", pa.int32()),  # settings generated by this run
        ("n_executed", pa.int32()),  # settings (re)executed by this run
        ("git_revision", _str),
        ("hostname", _str),
        ("library_versions_json", _str),
        ("data_sources_json", _str),
        ("cluster_address", _str),
        ("status", _str),  # RunStatus
        # nodes lost, engines restarted, chunks requeued: a JSON list, written as they happen
        # (the run goes on), null when none (run/execute/faults.py)
        _added("faults_json", _str, "7"),
    ]
)

# One shard per `repeat-check` invocation (named by its run id), one row per checked setting:
# how much re-generating its first problems changed, the noise floor of the report's paired
# tests (orchestrator/analysis/noise.py).
REPEAT_CHECKS = pa.schema(
    [
        ("run_id", _str),
        ("checked_at", pa.timestamp("us", tz="UTC")),
        ("setting_key", _str),
        ("backend", _str),
        ("model_name", _str),
        ("n_problems", pa.int32()),  # problems re-generated (the first N of the setting's)
        ("n_samples", pa.int32()),  # their samples
        ("n_program_changed", pa.int32()),  # samples whose post-processed program changed
        ("n_continuation_changed", pa.int32()),
        ("n_tokens_changed", pa.int32()),
        ("n_executed", pa.int32()),  # changed programs executed again
        ("n_outcome_changed", pa.int32()),  # samples whose score (pass/fail) changed
        # sum over the problems of |repeated - stored| per-problem score, in problems
        ("outcome_change_sum", pa.float64()),
        ("stored_score", pa.float64()),  # mean per-problem score over those problems, stored
        ("repeated_score", pa.float64()),  # ... and re-generated
    ]
)

TABLES: dict[str, pa.Schema] = {
    "settings": SETTINGS,
    "generations": GENERATIONS,
    "executions": EXECUTIONS,
    "scores": SCORES,
    "runs": RUNS,
    "repeat_checks": REPEAT_CHECKS,
}
# Tables whose shards are named by a run id (their rows' `run_id`), not by a setting key.
RUN_TABLES = frozenset({"runs", "repeat_checks"})
