# syntax=docker/dockerfile:1.7
# reprogrid sandbox/toolchain node: a CPU Ray node where generated programs run (HumanEvalFix's
# Python, InfiBench's python/node/typescript/g++/java/go/R unit tests). Also the Ray head of the
# recipes in this folder, and a driver image (it holds reprogrid and Ray, no GPU library).
#   docker build -f docker/sandbox.Dockerfile -t reprogrid-sandbox:0.1.0 .
# Toolchains as docs/infibench.md lists them: Debian 12 packages pinned; node from the official
# image; the CRAN package `assert` (not in Debian) from a dated CRAN snapshot. Versions of the
# Python packages must equal requirements/lock.txt (tests/unit/test_docker.py checks that).
FROM node:20.19.5-bookworm-slim AS node

FROM python:3.11.14-slim-bookworm

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    RAY_USAGE_STATS_ENABLED=0

# node + npm, without the rest of the node image (NODE_PATH for jsdom is derived from `node`'s
# prefix: /usr/local/lib/node_modules).
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx

# The JDK's postinst needs the man folder that slim images drop.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates=20250419~deb12u2 \
        g++=4:12.2.0-3 \
        libboost-dev=1.74.0.3 \
        openjdk-17-jdk-headless=17.0.21.1+2-1~deb12u1 \
        golang-go=2:1.19~1 \
        r-base-core=4.2.2.20221110-2 \
        r-cran-dplyr=1.0.10-1 \
        r-cran-data.table=1.14.8+dfsg-1 \
        r-cran-stringr=1.5.0-1 \
        r-cran-tidyverse=1.3.2+dfsg-1 \
        procps=2:4.0.2-3 \
        tini=0.19.0-1+b3 \
    && rm -rf /var/lib/apt/lists/*

# CRAN `assert` (InfiBench's R helper loads it) from a dated snapshot: the same version on
# every build.
RUN Rscript -e 'install.packages("assert", repos = "https://packagemanager.posit.co/cran/2026-06-01")' \
    && Rscript -e 'library(assert)'

# TypeScript 5.x: 7.x removed --outFile, which the grader uses.
RUN npm install -g jsdom@29.1.1 typescript@5.6.3 \
    && npm cache clean --force

RUN groupadd --gid 1000 reprogrid \
    && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash reprogrid \
    && python -m venv /opt/venv

# Ray and the store, plus what InfiBench's Python tests import (numpy, pandas, openpyxl,
# xlsxwriter, requests, yolk, pytz, scipy; torch, CPU build, for 1-3-213/217/231) and its
# similarity metric (rouge-score).
RUN pip install --no-cache-dir \
        "ray[default]==2.60.0" \
        "hydra-core==1.3.8" \
        "omegaconf==2.3.1" \
        "pandas==3.1.1" \
        "pyarrow==26.0.1" \
        "numpy==2.3.5" \
        "PyYAML==6.0.4" \
        "huggingface_hub==2.4.0" \
        "matplotlib==3.11.2" \
        "scipy==1.17.1" \
        "openpyxl==3.1.5" \
        "xlsxwriter==3.3.1" \
        "requests==2.34.2" \
        "yolk==0.4.3" \
        "pytz==2026.6" \
        "rouge_score==0.1.2" \
        "nltk==3.10.4" \
        "absl-py==2.5.1" \
    && pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu \
        "torch==2.13.0+cpu"

COPY --chown=reprogrid:reprogrid pyproject.toml README.md /opt/reprogrid/
COPY --chown=reprogrid:reprogrid orchestrator /opt/reprogrid/orchestrator
COPY --chown=reprogrid:reprogrid workers /opt/reprogrid/workers
COPY --chown=reprogrid:reprogrid storage /opt/reprogrid/storage
COPY --chown=reprogrid:reprogrid sweeps /opt/reprogrid/sweeps
RUN pip install --no-cache-dir --no-deps /opt/reprogrid

# Numeric, so Kubernetes' runAsNonRoot can verify it. As uid 1000 the sandbox isolates at
# "namespaces" where the runtime allows user namespaces, else "process"; "full" needs root
# with CAP_SYS_ADMIN and a writable cgroup (docs/sandbox.md; `reprogrid doctor` says which).
USER 1000:1000
WORKDIR /home/reprogrid
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["reprogrid", "doctor"]
