# as: orchestrator.report.tables.leaky  breaks: report_sub_wings_import_downwards
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type-only import is an import too: the floors hold for it
    from orchestrator.report.view.folder import Group

__all__ = ["Group"]
