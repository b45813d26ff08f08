# as: orchestrator.tools.leaky  breaks: nothing_imports_the_cli
from orchestrator.cli.main import build_parser

__all__ = ["build_parser"]
