# as: orchestrator.run.config.leaky  breaks: run_sub_wings_import_downwards
from orchestrator.run.prepare.grid import Cell

__all__ = ["Cell"]
