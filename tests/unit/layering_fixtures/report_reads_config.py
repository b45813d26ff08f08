# as: orchestrator.report.leaky  breaks: report_never_reads_config_ray_or_backends
from orchestrator.run.config.load import load_run_config

__all__ = ["load_run_config"]
