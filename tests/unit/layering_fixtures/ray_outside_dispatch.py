# as: orchestrator.run.leaky  breaks: ray_only_in_dispatch_and_tasks
import ray

__all__ = ["ray"]
