# as: storage.integrity  breaks: no_import_cycles
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for a type, yet storage.files imports storage.integrity: a cycle
    from storage.files import Files

__all__ = ["Files"]
