# jaxbench: `make bench MODEL=llama2` runs a recipe, `make test` runs the tests. Both set themselves up.
SHELL := /bin/bash
.DEFAULT_GOAL := help

MODEL ?= llama2
SIZE ?=
STEPS ?=
SET ?=
OUT ?= runs
VENV ?= .venv
# The interpreter the virtualenv is made from; found automatically (PATH, then pyenv) unless given.
PYTHON ?=
# Which jax wheels: cpu, cuda12 or cuda13 (default: from the NVIDIA driver, if any).
ACCEL ?= $(shell scripts/detect-accelerator)

VENV_PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(ACCEL)
TEST_STAMP := $(VENV)/.installed-test

SITE ?= site

REPEATS ?= 3
# pytest-xdist processes for make test (0: in one process).
TEST_WORKERS ?= 2

.PHONY: help bench ab microbench report dashboard test lint venv clean

help:
	@echo "make bench MODEL=llama2|gpt3|vit [SIZE=tiny|...] [STEPS=N] [SET='key.path=value ...']"
	@echo "make ab MODEL=llama2 A=<profile|flags> B=<profile|flags> [REPEATS=3]   A/B two flag sets"
	@echo "make microbench [SIZES=tiny|full] [K=expr]   kernel and collective microbenchmarks, into the store"
	@echo "make report   series states and incidents from the store (JAXBENCH_DB)"
	@echo "make dashboard [SITE=site]   the static HTML dashboard"
	@echo "make test     run the test suite (CPU)"
	@echo "make lint     ruff and mypy"

$(VENV_PY):
	@python="$(PYTHON)"; [ -n "$$python" ] || python=$$(scripts/find-python) || exit 1; \
	echo "creating $(VENV) with $$python ($$($$python --version))"; \
	$$python -m venv $(VENV)

$(STAMP): pyproject.toml | $(VENV_PY)
	$(VENV_PY) -m pip install --quiet --upgrade pip
	$(VENV_PY) -m pip install --quiet -e '.[$(ACCEL)]'
	@touch $@

$(TEST_STAMP): $(STAMP)
	$(VENV_PY) -m pip install --quiet -e '.[$(ACCEL),test]'
	@touch $@

venv: $(STAMP)

bench: $(STAMP)
	$(VENV)/bin/jaxbench run $(MODEL) $(if $(SIZE),--size $(SIZE)) $(if $(STEPS),--steps $(STEPS)) \
		$(foreach override,$(SET),--set $(override)) --out $(OUT)

ab: $(STAMP)
	@[ -n "$(A)" ] && [ -n "$(B)" ] || { echo "make ab needs A=... and B=... (flag profile names or '--flag=value ...')"; exit 1; }
	$(VENV)/bin/jaxbench ab $(MODEL) --a="$(A)" --b="$(B)" --repeats $(REPEATS) $(if $(SIZE),--size $(SIZE)) \
		$(if $(STEPS),--steps $(STEPS)) $(foreach override,$(SET),--set $(override)) --out $(OUT)/ab

# pytest-benchmark comes with the test extras.
microbench: $(TEST_STAMP)
	$(VENV)/bin/jaxbench microbench $(if $(SIZES),--sizes $(SIZES)) $(if $(K),-k '$(K)') --out $(OUT)

report: $(STAMP)
	$(VENV)/bin/jaxbench report

dashboard: $(STAMP)
	$(VENV)/bin/jaxbench report --format html --out $(SITE) --badges $(SITE)/badges

test: $(TEST_STAMP)
	JAX_PLATFORMS=cpu $(VENV_PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
