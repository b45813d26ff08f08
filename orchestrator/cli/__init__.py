"""The command line wing: argv -> one library call; the only place exceptions become exit codes.

Nothing in the project imports this package (the `reprogrid` entry point is `main`).
"""

from orchestrator.cli.main import main

__all__ = ["main"]
