# as: orchestrator.tools.leaky  breaks: orchestrator_reaches_backends_only_lazily
from workers.backends.tokens import load_tokenizer

__all__ = ["load_tokenizer"]
