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

# Containers (containers/manifest.yaml): `make build FLAVOR=cpu`, `make bench IMAGE=...`.
FLAVOR ?= cpu
# source | wheel (default: the flavor's)
INSTALL ?=
GHCR_ORG ?= jaxbench
REGISTRY ?= ghcr.io/$(GHCR_ORG)
DATE ?=
BASE_IMAGE ?=
IMAGE ?=
# Extra CA certificates pip needs inside image builds (a TLS-intercepting proxy); never kept in an image.
CA_CERTS ?= $(wildcard /usr/local/share/ca-certificates/*.crt)
# The virtualenv holds the wheel pins of this flavor of the manifest.
VENV_FLAVOR := cpu

VENV_PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(ACCEL)
TEST_STAMP := $(VENV)/.installed-test

SITE ?= site

REPEATS ?= 3
# pytest-xdist processes for make test (0: in one process).
TEST_WORKERS ?= 2

.PHONY: help bench ab microbench report dashboard test lint venv build push pull image-test clean

help:
	@echo "make bench MODEL=llama2|gpt3|vit [SIZE=tiny|...] [STEPS=N] [SET='key.path=value ...'] [IMAGE=ref]"
	@echo "make build [FLAVOR=cpu|jax|maxtext|levanter|t5x|pax] [INSTALL=source|wheel] [DATE=YYYY-MM-DD]"
	@echo "make push | make pull [FLAVOR=...] [DATE=...]   images at $(REGISTRY)/jax:<flavor>[-<date>]"
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

# The stack's versions come from containers/manifest.yaml (its wheel pins, as constraints), as in the images.
$(STAMP): pyproject.toml containers/manifest.yaml | $(VENV_PY)
	$(VENV_PY) -m pip install --quiet --upgrade pip
	$(VENV_PY) -m pip install --quiet pyyaml pydantic
	$(VENV_PY) -m containers.manifest $(VENV_FLAVOR) > $(VENV)/constraints.txt
	$(VENV_PY) -m pip install --quiet -c $(VENV)/constraints.txt -e '.[$(ACCEL)]'
	$(VENV)/bin/jaxbench manifest record --venv $(VENV_FLAVOR)
	@touch $@

$(TEST_STAMP): $(STAMP)
	$(VENV_PY) -m pip install --quiet -c $(VENV)/constraints.txt -e '.[$(ACCEL),test]'
	@touch $@

venv: $(STAMP)

bench: $(STAMP)
	$(VENV)/bin/jaxbench run $(MODEL) $(if $(SIZE),--size $(SIZE)) $(if $(STEPS),--steps $(STEPS)) \
		$(foreach override,$(SET),--set $(override)) --out $(OUT) $(if $(IMAGE),--image $(IMAGE))

# Images of FLAVOR; with no Docker engine, says so and leaves the virtualenv (built from the same manifest).
build: $(STAMP)
	@$(VENV)/bin/jaxbench build --flavor $(FLAVOR) --registry $(REGISTRY) $(if $(INSTALL),--install $(INSTALL)) \
		$(if $(DATE),--date $(DATE)) $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) \
		$(foreach cert,$(CA_CERTS),--ca-cert $(cert)) \
		$(if $(PIP_INDEX_URL),--pip-index-url $(PIP_INDEX_URL)) \
		$(if $(PIP_EXTRA_INDEX_URL),--pip-extra-index-url $(PIP_EXTRA_INDEX_URL))

push:
	docker push $(REGISTRY)/jax:$(FLAVOR)-$(or $(DATE),$(shell date -u +%F))
	docker push $(REGISTRY)/jax:$(FLAVOR)

pull:
	docker pull $(REGISTRY)/jax:$(FLAVOR)$(if $(DATE),-$(DATE))

# The cpu image chain for real: a private dockerd, a debootstrapped base, make build, make bench inside.
image-test: $(STAMP)
	scripts/image-test

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
	$(VENV)/bin/hadolint containers/*.Dockerfile

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
