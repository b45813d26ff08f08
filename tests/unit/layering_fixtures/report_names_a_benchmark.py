# as: orchestrator.report.leaky  breaks: report_never_reads_config_ray_or_backends
from workers.benchmarks.registry import get_benchmark

__all__ = ["get_benchmark"]
