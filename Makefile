# jaxbench: `make bench MODEL=llama2` runs a recipe, `make test` runs the tests. Both set themselves up.
# Make sets up (virtualenvs, images) and names CI's steps; what a step does is the jaxbench command's: ARGS='...'
# passes any of its options through (`jaxbench COMMAND --help`), and the variables below are shortcuts.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
# PYTHON: the interpreter the virtualenv is made from (default: found on PATH, then through pyenv). ACCEL: which
# jax wheels, cpu, cuda12 or cuda13 (default: from the NVIDIA driver, if any). EXTRAS: optional dependencies
# (pyproject.toml) installed too, e.g. EXTRAS=k8s for `--launcher k8s`.
ACCEL ?= $(shell scripts/detect-accelerator)
# The run's shortcuts, each a `jaxbench run` option left out when empty: MODEL, SIZE, STEPS, SET='key.path=value
# ...' (each a --set), BACKEND (`jaxbench backends`), IMAGE (run inside it), OUT. OVERLAY=DIR: this virtualenv
# with the components of `jaxbench overlay --out DIR` in front (DIR/site) and its manifest (DIR/manifest.yaml)
# recorded; `jaxbench run` refuses it with an image or a framework. SMOKE_BACKENDS: `jaxbench smoke --backends`.
MODEL ?= llama2
OUT ?= runs
# Images (containers/manifest.yaml): FLAVOR, INSTALL=source|wheel (default: the flavor's), LOCAL_BASE=1 (on the
# flavor's local Debian base, scripts/os-base-image), REGISTRY, DATE (default: today), ARCHES (make publish).
FLAVOR ?= cpu
GHCR_ORG ?= jaxbench
REGISTRY ?= ghcr.io/$(GHCR_ORG)
ARCHES ?= amd64,arm64
# Extra CA certificates pip needs inside image builds (a TLS-intercepting proxy); never kept in an image.
CA_CERTS ?= $(wildcard /usr/local/share/ca-certificates/*.crt)
# make dashboard's folder; make test's pytest-xdist processes (0: in one process). ARGS: see the top.
SITE ?= site
TEST_WORKERS ?= 2

VENV_PY := $(VENV)/bin/python
JAXBENCH := $(VENV)/bin/jaxbench
STAMP := $(VENV)/.installed-$(ACCEL)
extra_stamp = $(VENV)/.installed-$(1)
SETUP := $(STAMP) $(foreach extra,$(EXTRAS),$(call extra_stamp,$(extra)))
# The framework backends (`jaxbench backends --frameworks`) train in their own .venv-<name>, made from the
# manifest flavor of that name on first use. Asked as a recipe runs: $(VENV) exists by then.
FRAMEWORKS = $(shell $(JAXBENCH) backends --frameworks)
framework_stamps = $(if $(1),$(foreach name,$(filter $(1),$(FRAMEWORKS)),.venv-$(name)/.installed-$(ACCEL)))
framework_venvs = $(if $(call framework_stamps,$(1)),$(MAKE) --no-print-directory $(call framework_stamps,$(1)))
set_args = $(foreach override,$(SET),--set $(override))
recipe_args = $(if $(SIZE),--size $(SIZE)) $(if $(STEPS),--steps $(STEPS)) $(set_args) \
	$(if $(BACKEND),--backend $(BACKEND))
overlay_env = $(if $(OVERLAY),PYTHONPATH=$(abspath $(OVERLAY))/site \
	JAXBENCH_MANIFEST=$(abspath $(OVERLAY))/manifest.yaml)
image_args = --flavor $(FLAVOR) --registry $(REGISTRY) $(if $(DATE),--date $(DATE))

.PHONY: help bench smoke ab pr-check microbench gpu-check report dashboard nightly-local nightly-size-incident \
	demo triage-local build push publish pull image-test self-bench venv test test-integration lint clean

help:
	@echo "make bench MODEL=llama2|gpt3|vit [SIZE=…] [STEPS=N] [SET='key.path=value …'] [BACKEND=…] [IMAGE=ref]"
	@echo "           [OUT=runs] [OVERLAY=DIR] [ARGS='--launcher slurm --nodes 2 --no-ingest --nightly …']"
	@echo "make smoke [IMAGE=ref] [SMOKE_BACKENDS='native …'] | ab MODEL=… A=… B=… | pr-check BASE=rev HEAD=rev"
	@echo "make demo | microbench | gpu-check [STEPS=30] | report | dashboard [SITE=site] | self-bench [SELF_DB=url]"
	@echo "make nightly-local [OFFLINE=1] [TRIAGE=1] | nightly-size-incident | triage-local [TRIALS=N]"
	@echo "make build [FLAVOR=cpu|jax|maxtext|…] [INSTALL=source|wheel] [DATE=YYYY-MM-DD] [LOCAL_BASE=1]"
	@echo "make push | publish [ARCHES=amd64,arm64] | pull | image-test [FLAVOR=…] [DATE=…]"
	@echo "make venv [FLAVOR=<framework>] [EXTRAS=k8s] | test | test-integration [TEST_WORKERS=2] | lint | clean"

$(VENV_PY):
	@python="$(PYTHON)"; [ -n "$$python" ] || python=$$(scripts/find-python) || exit 1; \
	echo "creating $(VENV) with $$python ($$($$python --version))"; \
	$$python -m venv $(VENV)

# Step by step, saying what each costs (scripts/setup-venv: the manifest's cpu pins as constraints).
$(STAMP): pyproject.toml containers/manifest.yaml | $(VENV_PY)
	@scripts/setup-venv $(VENV) $(ACCEL) && touch $@

$(call extra_stamp,%): $(STAMP)
	@scripts/setup-venv $(VENV) $(ACCEL) $* && touch $@

# A framework's pins (its manifest flavor, this host's accelerator) through the images' own installer.
.venv-%/.installed-$(ACCEL): containers/manifest.yaml containers/install_stage.py | $(STAMP)
	@python="$(PYTHON)"; [ -n "$$python" ] || python=$$(scripts/find-python) || exit 1; \
	$(JAXBENCH) venv --flavor $* --accelerator $(ACCEL) --python "$$python" --dir .venv-$*
	@touch $@

venv: $(SETUP)
	$(call framework_venvs,$(FLAVOR))

bench: $(SETUP)
	$(if $(IMAGE),,$(call framework_venvs,$(BACKEND)))
	$(strip $(overlay_env) $(JAXBENCH) run $(MODEL) $(recipe_args) $(if $(IMAGE),--image $(IMAGE)) --out $(OUT) $(ARGS))

smoke: $(SETUP)
	$(if $(IMAGE),,$(call framework_venvs,$(or $(SMOKE_BACKENDS),$(FRAMEWORKS))))
	$(JAXBENCH) smoke --out $(OUT)/smoke $(if $(IMAGE),--image $(IMAGE)) \
		$(if $(SMOKE_BACKENDS),--backends $(SMOKE_BACKENDS)) $(ARGS)

ab: $(SETUP)
	$(JAXBENCH) ab $(MODEL) --a="$(A)" --b="$(B)" $(recipe_args) --out $(OUT)/ab $(ARGS)

pr-check: $(SETUP)
	$(JAXBENCH) pr-check --base "$(BASE)" $(if $(HEAD),--head "$(HEAD)") $(set_args) --out $(OUT) $(ARGS)

microbench: $(SETUP) $(call extra_stamp,test)
	$(JAXBENCH) microbench --out $(OUT) $(ARGS)

gpu-check: $(SETUP) $(call extra_stamp,test)
	$(JAXBENCH) gpu-check --out $(OUT) $(if $(STEPS),--steps $(STEPS)) $(ARGS)

report demo: $(SETUP)
	$(JAXBENCH) $@ $(ARGS)
dashboard: $(SETUP)
	$(JAXBENCH) report --format html --out $(SITE) --badges $(SITE)/badges $(ARGS)

# The nightly on local stand-ins, an image-size incident, triage of a stand-in optax's bad commits, a flavor's
# image chain for real, jaxbench's own speed: each script's header says how (its variables: make's command line).
nightly-local nightly-size-incident triage-local image-test self-bench: $(SETUP)
	scripts/$@
self-bench: $(call extra_stamp,test)

# With no Docker engine: one line and exit 6 (`make bench` runs natively, from the same manifest).
build: $(SETUP)
	@$(JAXBENCH) build $(image_args) $(if $(INSTALL),--install $(INSTALL)) $(if $(filter 1,$(LOCAL_BASE)),--local-base) \
		$(foreach cert,$(CA_CERTS),--ca-cert $(cert)) $(if $(PIP_INDEX_URL),--pip-index-url $(PIP_INDEX_URL)) \
		$(if $(PIP_EXTRA_INDEX_URL),--pip-extra-index-url $(PIP_EXTRA_INDEX_URL)) $(ARGS)

push: $(SETUP)
	@$(JAXBENCH) push $(image_args) $(ARGS)

publish: $(SETUP)
	@$(JAXBENCH) publish $(image_args) --arches $(ARCHES) $(ARGS)

pull:
	docker pull $(REGISTRY)/jax:$(FLAVOR)$(if $(DATE),-$(DATE))

# The unit lane, and the integration lane (tests/conftest.py: INTEGRATION_MARKERS); CI runs both.
test test-integration: $(call extra_stamp,test)
	JAX_PLATFORMS=cpu $(VENV_PY) -m pytest -n $(TEST_WORKERS) -m "$(if $(filter test,$@),not )integration" $(PYTEST_ARGS)

lint: $(call extra_stamp,test)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV_PY) scripts/check-package-hosts
	$(VENV_PY) scripts/check-fork-safety .github/workflows/*.yaml
	$(VENV)/bin/hadolint containers/*.Dockerfile
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yaml
	$(VENV)/bin/actionlint -shellcheck $(VENV)/bin/shellcheck -pyflakes= .github/workflows/*.yaml

clean:
	rm -rf $(VENV) .venv-* .pytest_cache .mypy_cache .ruff_cache *.egg-info
