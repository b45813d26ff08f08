# as: orchestrator.run.leaky  breaks: the_driver_asks_a_backends_definition
def batched(engine) -> bool:
    return engine.backend == "vllm"
