# as: orchestrator.run.leaky  breaks: run_sees_workers_through_contracts
def engine_name() -> str:
    from workers.backends.hf.engine import HfBackend

    return HfBackend.__name__
