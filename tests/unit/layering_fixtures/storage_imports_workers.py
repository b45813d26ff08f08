# as: storage.leaky  breaks: storage_imports_nothing_of_the_project
from workers.spec import Outcome

__all__ = ["Outcome"]
