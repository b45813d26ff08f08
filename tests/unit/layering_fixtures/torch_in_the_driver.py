# as: orchestrator.tools.leaky  breaks: heavy_libraries_only_in_backends
def count() -> int:
    import torch

    return int(torch.zeros(1).numel())
