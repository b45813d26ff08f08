"""The benchmark contract: everything the driver and the workers know about a benchmark.

A benchmark has two faces. Its `BenchmarkDefinition` is what planning needs before any data is
loaded: its name, the variants and template values it accepts, how the `own` template resolves
for a model, which settings it cannot score (planned out as skip rows), how to load its
problems, and its card (workers/card.py: what the report reads about it). `load` returns a
`Benchmark`: the problems bound to the code that turns a setting into generation requests,
generations into scored samples, and execution rows into the setting's headline score. The
loaded benchmark is shipped to Ray workers once per grid.

Each benchmark lives in its own folder `workers/benchmarks/<name>/` and is named once in
`workers/benchmarks/registry.py`; nothing else in the project branches on a benchmark's name
(docs/benchmarks.md walks through adding one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from workers.card import BenchmarkCard
from workers.execspec import ExecutionRecord, SandboxLimits
from workers.spec import Generation, GenRequest, ModelSpec, SampleRecord, SettingSpec

# The tokenizer's chat template applied to messages (None where the engine cannot render one).
ChatRenderer = Callable[[Sequence[dict[str, str]]], str]


class BenchmarkDataError(ValueError):
    """A benchmark's problems are missing, malformed, or cannot be fetched."""


@dataclass(frozen=True)
class BenchmarkSource:
    """Where a benchmark's problems come from (resolved from config at the CLI edge)."""

    name: str  # a registry name, e.g. "humanevalfix"
    variant: str  # one of the definition's variants
    source: str  # "local" (the data folder), "hub", or a path the benchmark understands
    hub_revision: str  # dataset revision for source="hub"
    data_dir: str | None  # the data folder for source="local"; None: not configured
    cache_dir: str | None = None  # Hub downloads


@dataclass(frozen=True)
class ScoreSummary:
    """A benchmark's own headline metric for a setting (replaces the default pass@1)."""

    metric: str  # e.g. "best@10"
    value: float | None  # a fraction in [0, 1]
    value_std: float | None
    n_problems: int
    n_unscorable: int  # problems that could not be scored here (e.g. a missing toolchain)
    details_json: str  # JSON object: breakdowns, merged into the scores row's `details`
    # Each problem's part of the headline (task id, score; InfiBench: the mean of its group
    # bests), stored as the scores row's `problem_scores` (the report's interval over problems).
    problem_scores: tuple[tuple[str, float], ...] = ()


@runtime_checkable
class Benchmark(Protocol):
    """A loaded benchmark: its problems and the pure steps around generation and execution."""

    @property
    def name(self) -> str: ...

    @property
    def data_sha256(self) -> str:
        """Hash of the loaded problems (part of every setting key)."""
        ...

    @property
    def source(self) -> str:
        """Where the problems were loaded from (recorded per run)."""
        ...

    def problem_ids(self) -> tuple[str, ...]:
        """Every problem's task id, in benchmark order (`limit` selects a prefix)."""
        ...

    def requests(
        self, setting: SettingSpec, key: str, chat: ChatRenderer | None = None
    ) -> list[GenRequest]:
        """The generation requests of one setting (its problems, samples and seeds)."""
        ...

    def samples(
        self,
        setting: SettingSpec,
        requests: Sequence[GenRequest],
        generations: Sequence[Generation],
        eos_token: str | None,
    ) -> tuple[SampleRecord, ...]:
        """Generations post-processed into the candidates that get scored."""
        ...

    def execute(
        self, samples: Sequence[SampleRecord], limits: SandboxLimits, workers: int | None = None
    ) -> list[ExecutionRecord]:
        """Score every candidate (in the sandbox where code runs); one record per sample."""
        ...

    def summarize(self, executions: Sequence[Mapping[str, Any]]) -> ScoreSummary | None:
        """The setting's headline from its stored execution rows; None: pass@k over problems."""
        ...

    def execution_environment(self, limits: SandboxLimits) -> dict[str, str]:
        """What on this host, besides a program and `limits`, can change its outcome: the
        sandbox's isolation level, the interpreter, the toolchains. Part of the execution
        identity (workers/keys.py): when it changes, stored generations are executed again."""
        ...


@runtime_checkable
class BenchmarkDefinition(Protocol):
    """What planning knows about a benchmark before its data is loaded."""

    @property
    def name(self) -> str: ...

    @property
    def variants(self) -> tuple[str, ...]:
        """Valid values of `benchmark.variant` (and of the `variant` grid axis)."""
        ...

    @property
    def templates(self) -> tuple[str, ...]:
        """Valid values of `template`, "own" (the model's own format) included."""
        ...

    @property
    def card(self) -> BenchmarkCard:
        """What a reader of its results needs (dataset, headline metric and scale, literature,
        how a reported value is matched): stored with every setting, read by the report."""
        ...

    def template_note(self, template: str) -> str | None:
        """Why a value that is not one of `templates` is refused, when there is more to say
        than "unknown" (e.g. a template of another task); None otherwise."""
        ...

    def resolve_template(self, template: str, model: ModelSpec) -> str:
        """The template a setting records: "own" becomes the model's concrete template."""
        ...

    def template_kind(self, template: str, model: ModelSpec) -> str:
        """ "own" when `template` is the model's own format, else the template's name (what
        the report's effects compare; stored with every setting)."""
        ...

    def skip_reason(self, setting: SettingSpec) -> str | None:
        """Why this benchmark cannot score the setting (a stored skip row), or None."""
        ...

    def load(self, source: BenchmarkSource) -> Benchmark:
        """Load the problems. Raises BenchmarkDataError."""
        ...
