"""Loading an InfiBench suite at the CLI edge."""

from __future__ import annotations

from pathlib import Path

from orchestrator.benchmarks import LoadedBenchmark
from orchestrator.config import ENV_DATA_DIR, BenchmarkConf, ConfigError
from workers.benchmarks.infibench.adapter import InfiBench
from workers.benchmarks.infibench.suite import (
    SuiteError,
    load_dev_suite,
    load_packed_suite,
    load_suite,
)

SUITES = ("v2.1", "dev")


def load_infibench(conf: BenchmarkConf) -> LoadedBenchmark:
    """`source=local`: <data_dir>/infibench (variant v2.1, or dev = the v2.0.0 dev suite);
    otherwise a suite folder (with suite_v2.1.yaml) or a packed CSV path."""
    try:
        if conf.source == "local":
            if not conf.data_dir:
                raise ConfigError(f"no data folder: set {ENV_DATA_DIR} or paths.data_dir")
            folder = Path(conf.data_dir) / "infibench"
            if conf.variant == "dev":
                suite = load_dev_suite(folder)
            elif conf.variant == "v2.1":
                suite = load_suite(folder)
            else:
                raise ConfigError(
                    f"Unknown InfiBench suite {conf.variant!r}. Valid: {', '.join(SUITES)}"
                )
            source = str(folder)
        elif conf.source == "hub":
            raise ConfigError(
                "InfiBench from the Hub is not supported offline; download the packed CSV "
                "(llylly001/InfiBench) and pass benchmark.source=<path to the CSV>"
            )
        elif conf.source.endswith(".csv"):
            suite, source = load_packed_suite(conf.source), conf.source
        else:
            suite, source = load_suite(conf.source), conf.source
    except SuiteError as e:
        raise ConfigError(str(e)) from e
    n = len(suite.cases) if conf.limit is None else min(conf.limit, len(suite.cases))
    return LoadedBenchmark(InfiBench(suite), suite.sha256, source, n)
