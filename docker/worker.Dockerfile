# syntax=docker/dockerfile:1.7
# reprogrid GPU worker: a Ray node that loads engines (transformers + bitsandbytes, official
# vLLM for CUDA). Build from the repository root:
#   docker build -f docker/worker.Dockerfile -t reprogrid-worker:0.1.0 .
# Every Python package comes from one lock, requirements/gpu-worker.txt (the core dependencies
# plus the `gpu` extra, resolved together: vllm==0.33.0 pins torch 2.14.0 and its nvidia-*
# wheels, which carry the CUDA user-space libraries); the host's driver is mounted by the NVIDIA
# container toolkit (NVIDIA_* variables below). `make check-gpu-lock` resolves the lock against
# the registry. Python 3.11.14, the same as the sandbox image (the Ray head): Ray refuses a node
# or driver whose Python differs from the cluster's (docs/install.md).
FROM python:3.11.14-slim-bookworm

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    HF_HOME=/home/reprogrid/.cache/huggingface \
    RAY_USAGE_STATS_ENABLED=0

# gcc + libc headers: triton (under vLLM/torch.compile) builds small launchers at run time.
# tini reaps Ray's processes; procps gives `ps` for `ray stop`/debugging inside the container.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        gcc=4:12.2.0-3 \
        libc6-dev=2.36-9+deb12u14 \
        procps=2:4.0.2-3 \
        tini=0.19.0-1+b3 \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --gid 1000 reprogrid \
    && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash reprogrid \
    && python -m venv /opt/venv

# One resolver run for the whole stack, from the lock (--no-deps: the lock is complete, and
# `make check-gpu-lock` proves it resolves on its own).
COPY requirements/gpu-worker.txt /opt/reprogrid/requirements/gpu-worker.txt
RUN pip install --no-cache-dir --no-deps -r /opt/reprogrid/requirements/gpu-worker.txt

# The project last: it changes most often. --no-deps: its dependencies are the lock above.
COPY --chown=reprogrid:reprogrid pyproject.toml README.md /opt/reprogrid/
COPY --chown=reprogrid:reprogrid orchestrator /opt/reprogrid/orchestrator
COPY --chown=reprogrid:reprogrid workers /opt/reprogrid/workers
COPY --chown=reprogrid:reprogrid storage /opt/reprogrid/storage
COPY --chown=reprogrid:reprogrid sweeps /opt/reprogrid/sweeps
RUN pip install --no-cache-dir --no-deps /opt/reprogrid

# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
WORKDIR /home/reprogrid
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["reprogrid", "--help"]
