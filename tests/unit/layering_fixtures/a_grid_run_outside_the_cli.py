# as: orchestrator.run.execute.leaky  breaks: only_the_cli_runs_a_grid
from orchestrator.run.execute.runner import run_grid

__all__ = ["run_grid"]
