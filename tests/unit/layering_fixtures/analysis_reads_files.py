# as: orchestrator.analysis.leaky  breaks: analysis_is_pure
from pathlib import Path


def scores(path: str) -> str:
    with open(path) as fh:
        return fh.read() + str(Path(path))
