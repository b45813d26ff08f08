# syntax=docker/dockerfile:1.7
# reprogrid GPU worker: a Ray node that loads engines (transformers + bitsandbytes, official
# vLLM for CUDA). Build from the repository root:
#   docker build -f docker/worker.Dockerfile -t reprogrid-worker:0.1.0 .
# CUDA user-space libraries come with the pinned torch/vLLM wheels (vllm==0.33.0 pins torch
# 2.14.0 and its nvidia-* wheels); the host's driver is mounted by the NVIDIA container toolkit
# (NVIDIA_* variables below). Python 3.11 on Debian 12, as on the development machines.
# Versions of the Python packages must equal requirements/lock.txt (vllm: the `gpu` extra of
# pyproject.toml); tests/unit/test_docker.py checks that.
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

# One resolver run for the heavy stack, so pip sees every pin at once (vLLM pins torch).
RUN pip install --no-cache-dir \
        "vllm==0.33.0" \
        "transformers==5.19.0" \
        "tokenizers==0.23.3" \
        "accelerate==1.15.0" \
        "bitsandbytes==0.50.2" \
        "safetensors==0.8.0" \
        "huggingface_hub==2.4.0" \
        "gguf==0.19.0" \
        "ray[default]==2.60.0" \
        "hydra-core==1.3.8" \
        "omegaconf==2.3.1" \
        "pandas==3.1.1" \
        "pyarrow==26.0.1" \
        "numpy==2.3.5" \
        "PyYAML==6.0.4" \
        "rouge_score==0.1.2"

# The project last: it changes most often. --no-deps: its dependencies are the pins above
# (pyproject's torch==2.13.0 is the CPU development pin; here vLLM's torch 2.14.0 is used).
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
