# as: storage.leaky  breaks: storage_imports_nothing_of_the_project
from workers.execspec import Outcome

__all__ = ["Outcome"]
