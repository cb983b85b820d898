# The two commands a newcomer needs: `make run` (the nightly on this machine, then the dashboard) and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.perfdash-installed

# Compiled kernels and Inductor's precompiled header persist outside the clone so warm runs compile in seconds.
PERFDASH_CACHE_DIR ?= $(HOME)/.cache/perfdash
export PERFDASH_CACHE_DIR
export TORCHINDUCTOR_CACHE_DIR ?= $(PERFDASH_CACHE_DIR)/inductor
export TMPDIR := $(PERFDASH_CACHE_DIR)/tmp

.PHONY: help setup run test lint clean

help:
	@echo "make run   - set up, run a small nightly on this CPU into perfdash.db, then serve the dashboard"
	@echo "make test  - set up everything the tests need (venv, postgresql, chromium, groovy) and run them all"

$(STAMP): pyproject.toml scripts/setup.sh
	scripts/setup.sh "$(VENV)"
	@touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	@mkdir -p "$(TMPDIR)" "$(TORCHINDUCTOR_CACHE_DIR)"
	$(VENV)/bin/perfdash nightly

test: $(STAMP)
	@mkdir -p "$(TMPDIR)" "$(TORCHINDUCTOR_CACHE_DIR)"
	$(VENV)/bin/ruff check .
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) results perfdash.db .pytest_cache
