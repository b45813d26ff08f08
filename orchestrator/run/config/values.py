"""The values of a setting (top-level keys and grid axes), checked and normalised: decodings,
templates, variants, precisions, enums and numbers. `read_cells` reads them all from the
composed config and the command line's sweeps, once (config/load.py calls it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.run.config.options import (
    CELL_NUMBERS,
    Range,
    choice_error,
    flag,
    number,
    parse_choice,
)
from orchestrator.run.config.overrides import GRID_AXES
from workers.backends.registry import BACKENDS
from workers.benchmarks.base import BenchmarkDefinition
from workers.benchmarks.registry import UnknownBenchmark, get_benchmark
from workers.spec import (
    PRECISIONS,
    Bnb4bitType,
    DecodingSpec,
    Dtype,
    LengthSemantics,
    Quant,
    SeedPolicy,
)

# Sampling temperatures: above 0 (0 is greedy: say so), at most 2 (the largest the OpenAI API and
# the code-LLM literature use; beyond it sampling is close to uniform noise, and `t9` is far
# more likely a typo of t0.9 than a setting anyone means).
TEMPERATURE = Range(
    float, 0, 2, low_open=True, why="0 is greedy (decoding=greedy); t0.2 and t0.8 are the study's"
)


def decoding_spec(name: str, presets: Mapping[str, Any]) -> DecodingSpec:
    """A named decoding (`decodings.<name>`), or `t<T>`: the harness's sampling at temperature
    T (top_p 0.95, top_k off). Parameters are range-checked."""
    if name in presets:
        node = presets[name]
        where = f"decodings.{name}"
        do_sample = flag(f"{where}.do_sample", node["do_sample"])
        temperature = number(
            f"{where}.temperature",
            node.get("temperature", 1.0),
            TEMPERATURE,
        )
        return DecodingSpec(
            name=name,
            do_sample=do_sample,
            temperature=temperature,
            top_p=number(
                f"{where}.top_p", node.get("top_p", 1.0), Range(float, 0, 1, low_open=True)
            ),
            top_k=number(f"{where}.top_k", node.get("top_k", 0), Range(int, 0)),
        )
    if name.startswith("t"):
        try:
            temperature = float(name[1:])
        except ValueError:
            temperature = None
        if temperature == 0:
            raise ConfigError(
                f"decoding {name!r}: temperature 0 is greedy decoding; use decoding=greedy"
            )
        if temperature is not None:  # t<T>: harness sampling at temperature T
            if len(name) == 2 and name[1].isdigit() and temperature > 2:
                raise ConfigError(
                    f"decoding {name!r}: temperature must be a number > 0 and <= 2, got "
                    f"{temperature:g}. Did you mean: t0.{name[1]}?"
                )
            number(f"decoding {name!r}: temperature", temperature, TEMPERATURE)
            return DecodingSpec(name, True, temperature, 0.95, 0)
    raise choice_error("decoding", name, [*presets, "t<temperature>"])


def benchmark_definition(name: str) -> BenchmarkDefinition:
    try:
        return get_benchmark(name)
    except UnknownBenchmark as e:
        raise ConfigError(str(e)) from None


def validate_cell_value(
    name: str, value: Any, presets: Mapping[str, Any], benchmark: BenchmarkDefinition
) -> Any:
    """Check one setting value (top-level or axis) and return it normalised."""
    if name == "template":
        if str(value) not in benchmark.templates:
            error = choice_error("template", value, benchmark.templates)
            note = benchmark.template_note(str(value))
            raise ConfigError(f"{note} {error}") if note else error
        return str(value)
    if name == "variant":
        if str(value) not in benchmark.variants:
            raise choice_error(f"{benchmark.name} variant", value, benchmark.variants)
        return str(value)
    if name == "decoding":
        decoding_spec(str(value), presets)
        return str(value)
    if name in CELL_NUMBERS:
        return number(name, value, CELL_NUMBERS[name])
    if name == "precision":
        if value is None:
            return None
        if str(value) not in PRECISIONS:
            raise choice_error("precision", value, list(PRECISIONS))
        return str(value)
    enums = {
        "dtype": Dtype,
        "quant": Quant,
        "seed_policy": SeedPolicy,
        "length_semantics": LengthSemantics,
        "bnb_4bit_quant_type": Bnb4bitType,
    }
    if name in enums:
        return parse_choice(enums[name], name, value).value
    if name == "backend":
        choices = (*BACKENDS, "auto")  # auto: the eligible backend of highest rank
        if str(value) not in choices:
            raise choice_error("backend", value, choices)
        return str(value)
    raise choice_error("setting field", name, GRID_AXES)


CELL_FIELDS = (
    "template",
    "decoding",
    "max_length",
    "length_semantics",
    "precision",
    "dtype",
    "quant",
    "bnb_4bit_quant_type",
    "backend",
    "n_samples",
    "samples_per_call",
    "seed",
    "seed_policy",
)


@dataclass(frozen=True)
class CellValues:
    """A grid's setting values, checked: the defaults, the axes and the decodings they name."""

    defaults: tuple[tuple[str, Any], ...]  # sorted (name, value)
    axes: tuple[tuple[str, tuple[Any, ...]], ...]  # ordered: the grid's product order
    decodings: tuple[tuple[str, DecodingSpec], ...]  # every decoding a cell can name
    grid_models: tuple[str, ...] | None  # the `model` axis of the grid config, if it has one


def read_cells(cfg: Mapping[str, Any], sweeps: Mapping[str, list[str]]) -> CellValues:
    """Every setting value of the composed (plain) config and the command line's sweeps,
    checked against the configured benchmark; a sweep replaces the grid config's axis."""
    definition = benchmark_definition(str(cfg["benchmark"]["name"]))
    presets = cfg["decodings"]
    if not isinstance(presets, dict):
        raise ConfigError(f"decodings must be a mapping, got {type(presets).__name__}")
    grid_models, raw = _grid_axes(cfg["grid"], sweeps)
    axes = tuple(
        (name, tuple(validate_cell_value(name, v, presets, definition) for v in values))
        for name, values in raw.items()
    )
    defaults = {
        name: validate_cell_value(name, cfg[name], presets, definition) for name in CELL_FIELDS
    }
    variant = cfg["benchmark"]["variant"]
    defaults["variant"] = validate_cell_value("variant", variant, presets, definition)
    names = {str(v) for name, vs in axes if name == "decoding" for v in vs}
    names.add(defaults["decoding"])
    return CellValues(
        defaults=tuple(sorted(defaults.items())),
        axes=axes,
        decodings=tuple(sorted((d, decoding_spec(d, presets)) for d in names)),
        grid_models=grid_models,
    )


def _grid_axes(
    grid: Any, sweeps: Mapping[str, list[str]]
) -> tuple[tuple[str, ...] | None, dict[str, list[Any]]]:
    """(models named by the grid config, {axis: raw values}); command-line sweeps override or
    add axes (`model` sweeps are the caller's)."""
    if not isinstance(grid or {}, dict):
        raise ConfigError("a grid config must be a mapping of axis -> list of values")
    grid = dict(grid or {})
    models = grid.pop("model", None)
    axes: dict[str, list[Any]] = {}
    for name, values in grid.items():
        if name not in GRID_AXES:
            raise choice_error("grid axis", name, GRID_AXES)
        axes[name] = list(values) if isinstance(values, list) else [values]
    axes.update({k: v for k, v in sweeps.items() if k != "model"})
    listed = models if isinstance(models, list) else [models] if models else []
    return (tuple(str(m) for m in listed) or None), axes
