# as: orchestrator.tools.leaky  breaks: tools_see_run_through_its_api
from orchestrator.run.prepare.grid import expand_grid

__all__ = ["expand_grid"]
