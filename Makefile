# The two commands a newcomer needs: `make run` (the nightly on this machine, then the dashboard) and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
# `make run` installs what the nightly and the dashboard use; `make test` adds what the tests use (a second stamp).
RUN_STAMP := $(VENV)/.perfdash-run
TEST_STAMP := $(VENV)/.perfdash-test

# Compiled kernels and Inductor's precompiled header persist outside the clone so warm runs compile in seconds.
PERFDASH_CACHE_DIR ?= $(HOME)/.cache/perfdash
export PERFDASH_CACHE_DIR
export TORCHINDUCTOR_CACHE_DIR ?= $(PERFDASH_CACHE_DIR)/inductor
export TMPDIR := $(PERFDASH_CACHE_DIR)/tmp

# `make test` runs pytest on PYTEST_WORKERS pytest-xdist workers, the tests grouped by tests/conftest.py (a file, or a
# folder whose session fixtures build images or compile, runs on one worker, in collection order: tests/runner last);
# PYTEST_WORKERS=1 runs them all in one process. Default 2 (two whole runs passed on two workers, docs/testing.md);
# 1 when the tests are given a database of their own (PERFDASH_TEST_DATABASE_URL): each worker would migrate it.
ifdef PERFDASH_TEST_DATABASE_URL
PYTEST_WORKERS ?= 1
else
PYTEST_WORKERS ?= 2
endif
ifeq ($(PYTEST_WORKERS),1)
PYTEST_PARALLEL := -p no:xdist
else
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder
endif

.PHONY: help setup run test lint clean

help:
	@echo "make run   - set up, run a small nightly on this CPU into perfdash.db, then serve the dashboard"
	@echo "make test  - set up everything the tests need (venv, postgresql, chromium, groovy, podman) and run them all"

# TorchBench's pin and the CPU list whose models' requirements are installed are part of the set-up too.
SETUP_INPUTS := pyproject.toml scripts/setup.sh scripts/install-system-packages.sh scripts/install-torchbench.sh \
	runner/torchbench_install.py runner/suites/data/torchbench.toml

$(RUN_STAMP): $(SETUP_INPUTS)
	scripts/setup.sh "$(VENV)" run
	@touch $(RUN_STAMP)

$(TEST_STAMP): $(SETUP_INPUTS)
	scripts/setup.sh "$(VENV)" test
	@touch $(TEST_STAMP) $(RUN_STAMP)

setup: $(TEST_STAMP)

run: $(RUN_STAMP)
	@mkdir -p "$(TMPDIR)" "$(TORCHINDUCTOR_CACHE_DIR)"
	$(VENV)/bin/perfdash nightly

test: $(TEST_STAMP)
	@mkdir -p "$(TMPDIR)" "$(TORCHINDUCTOR_CACHE_DIR)"
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) results perfdash.db .pytest_cache
