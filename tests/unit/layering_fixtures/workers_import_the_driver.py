# as: workers.leaky  breaks: workers_never_import_orchestrator
from orchestrator.errors import ConfigError

__all__ = ["ConfigError"]
