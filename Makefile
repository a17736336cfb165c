# jaxbench: `make bench MODEL=llama2` runs a recipe, `make test` runs the tests. Both set themselves up.
SHELL := /bin/bash
.DEFAULT_GOAL := help

MODEL ?= llama2
# Who trains the recipe (harness/backends/): native is jaxbench's own Flax models and loop; maxtext and
# levanter are those frameworks' own trainers, each in its own virtualenv (.venv-<backend>, made from the
# manifest flavor of that name) unless IMAGE names an image that holds it.
BACKEND ?= native
FRAMEWORK_BACKENDS := maxtext levanter
# Where the run happens (jaxbench/wiring.py): local, image (the default when IMAGE is given), slurm or k8s.
LAUNCHER ?=
SIZE ?=
STEPS ?=
SET ?=
OUT ?= runs
# Hosts per run; more than one needs LAUNCHER=slurm (harness/launch/slurm.py) or k8s. The SLURM job's shape and
# place: TASKS_PER_NODE (default: one per GPU, else one), GPUS_PER_NODE, PARTITION, ACCOUNT, TIME;
# DRY_RUN=1 prints the batch script instead of submitting it. LAUNCHER=k8s (harness/launch/k8s.py) runs a
# JobSet of NODES pods of IMAGE in NAMESPACE (default: the KUBECONFIG context's) with GPUS_PER_NODE and TIME;
# DRY_RUN=1 prints its manifest.
NODES ?= 1
TASKS_PER_NODE ?=
GPUS_PER_NODE ?=
PARTITION ?=
ACCOUNT ?=
TIME ?=
DRY_RUN ?=
NAMESPACE ?=
# INGEST=0: leave the result file only (the nightly's benchmark jobs; its judge job ingests them all).
INGEST ?= 1
# OVERLAY=DIR: the run imports DIR/site first and records DIR/manifest.yaml: this virtualenv with some
# pure-Python components at other commits (`jaxbench overlay`, containers/overlay.py; no image needed).
OVERLAY ?=
# NIGHTLY=1: a run of the nightly plan (`--nightly`), judged by `jaxbench detect`; by default a run is ad hoc,
# reported but never opening an incident.
NIGHTLY ?=
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
# LOCAL_BASE=1: build on the flavor's local base (containers/manifest.yaml: local_base; Debian, made here by
# scripts/os-base-image without a registry), as the tests and CI do.
LOCAL_BASE ?=
IMAGE ?=
# Another manifest than containers/manifest.yaml for make build (the nightly's bumped copy).
MANIFEST ?=
# Extra CA certificates pip needs inside image builds (a TLS-intercepting proxy); never kept in an image.
CA_CERTS ?= $(wildcard /usr/local/share/ca-certificates/*.crt)
# The virtualenv holds the wheel pins of this flavor of the manifest.
VENV_FLAVOR := cpu

VENV_PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(ACCEL)
TEST_STAMP := $(VENV)/.installed-test
# A framework's own virtualenv: what `make bench BACKEND=<framework>` needs on a host, and `make venv FLAVOR=`.
framework_stamp = .venv-$(1)/.installed-$(ACCEL)
BENCH_NEEDS := $(if $(and $(filter $(FRAMEWORK_BACKENDS),$(BACKEND)),$(if $(IMAGE),,1)),$(call framework_stamp,$(BACKEND)))
# LAUNCHER=k8s: the Kubernetes client and schemas (the k8s extra) in .venv.
K8S_STAMP := $(VENV)/.installed-k8s
BENCH_NEEDS += $(if $(filter k8s,$(LAUNCHER)),$(K8S_STAMP))
VENV_NEEDS := $(if $(filter $(FRAMEWORK_BACKENDS),$(FLAVOR)),$(call framework_stamp,$(FLAVOR)))

SITE ?= site

REPEATS ?= 3
# pytest-xdist processes for make test (0: in one process).
TEST_WORKERS ?= 2

.PHONY: help bench pr-check smoke nightly-local nightly-size-incident triage-local ab microbench gpu-check report dashboard test lint venv build push publish pull image-test clean

help:
	@echo "make bench MODEL=llama2|gpt3|vit [SIZE=tiny|...] [STEPS=N] [SET='key.path=value ...'] [BACKEND=native|maxtext|levanter]"
	@echo "           [LAUNCHER=local|image|slurm|k8s] [IMAGE=ref]   where the run happens (IMAGE alone: inside that image)"
	@echo "           [NODES=N TASKS_PER_NODE=T GPUS_PER_NODE=G PARTITION=P ACCOUNT=A TIME=T DRY_RUN=1]   LAUNCHER=slurm"
	@echo "           [LAUNCHER=k8s IMAGE=ref NODES=N GPUS_PER_NODE=G TIME=T NAMESPACE=NS DRY_RUN=1]   a JobSet (KUBECONFIG)"
	@echo "           [NIGHTLY=1]   a run of the nightly plan: judged (default: ad hoc, only reported)"
	@echo "           [OVERLAY=DIR]   in this virtualenv with components at other commits (jaxbench overlay --out DIR)"
	@echo "make build [FLAVOR=cpu|jax|maxtext|levanter|t5x|pax] [INSTALL=source|wheel] [DATE=YYYY-MM-DD] [LOCAL_BASE=1]"
	@echo "make push [FLAVOR=...] [DATE=...]   this machine's build as $(REGISTRY)/jax:<flavor>-<date>-<arch>"
	@echo "make publish [FLAVOR=...] [DATE=...] [ARCHES=amd64,arm64]   multi-arch <flavor>-<date>; <flavor> if all built"
	@echo "make pull [FLAVOR=...] [DATE=...]   $(REGISTRY)/jax:<flavor>[-<date>] for this machine's architecture"
	@echo "make pr-check BASE=rev HEAD=rev | BASE=ref SOURCE=comp=URL#REF [RECIPES='llama2:tiny ...'] [REPEATS=5] [CPUS=1]"
	@echo "           a change against its base: paired runs, a verdict per benchmark, exit 4 on a regression"
	@echo "make ab MODEL=llama2 A=<profile|flags> B=<profile|flags> [REPEATS=3]   A/B two flag sets"
	@echo "make microbench [SIZES=tiny|full] [K=expr]   kernel and collective microbenchmarks, into the store"
	@echo "make gpu-check [STEPS=30] [OUT=runs]   first thing on a lent GPU: the recipes and microbenchmarks, one summary"
	@echo "make report   series states and incidents from the store (JAXBENCH_DB)"
	@echo "make dashboard [SITE=site]   the static HTML dashboard"
	@echo "make smoke [IMAGE=ref] [SMOKE_BACKENDS='native maxtext levanter']   each backend's tiny sizes on the CPU"
	@echo "make nightly-local [OFFLINE=1] [TRIAGE=1]   the nightly pipeline end to end with local stand-ins"
	@echo "make nightly-size-incident       three local nights whose bump adds a large package: an image-size incident"
	@echo "make triage-local [TRIALS=N]     a slow and a numerics-breaking stand-in commit, found by nightly triage"
	@echo "make venv [FLAVOR=maxtext|levanter]   the harness's .venv; with a framework flavor, also its own .venv-<flavor>"
	@echo "make test     run the test suite (CPU)"
	@echo "make lint     ruff, mypy, the layer contract, package hosts, hadolint and the workflows"

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

$(K8S_STAMP): $(STAMP)
	$(VENV_PY) -m pip install --quiet -c $(VENV)/constraints.txt -e '.[$(ACCEL),k8s]'
	@touch $@

$(TEST_STAMP): $(STAMP)
	$(VENV_PY) -m pip install --quiet -c $(VENV)/constraints.txt -e '.[$(ACCEL),test]'
	@touch $@

# The framework's pins (its manifest flavor, this host's accelerator) through the images' own installer.
.venv-%/.installed-$(ACCEL): containers/manifest.yaml containers/install_stage.py | $(STAMP)
	@python="$(PYTHON)"; [ -n "$$python" ] || python=$$(scripts/find-python) || exit 1; \
	$(VENV)/bin/jaxbench venv --flavor $* --accelerator $(ACCEL) --python "$$python" --dir .venv-$*
	@touch $@

venv: $(STAMP) $(VENV_NEEDS)

bench: $(STAMP) $(BENCH_NEEDS)
	@[ -z "$(OVERLAY)" ] || [ -z "$(IMAGE)$(filter-out native,$(BACKEND))" ] || { echo "make bench OVERLAY=$(OVERLAY): an overlay adds to the harness's $(VENV), so runs with BACKEND=native and no IMAGE"; exit 2; }
	$(if $(OVERLAY),PYTHONPATH=$(abspath $(OVERLAY))/site JAXBENCH_MANIFEST=$(abspath $(OVERLAY))/manifest.yaml )$(VENV)/bin/jaxbench run $(MODEL) $(if $(SIZE),--size $(SIZE)) $(if $(STEPS),--steps $(STEPS)) \
		$(foreach override,$(SET),--set $(override)) --out $(OUT) --backend $(BACKEND) \
		$(if $(LAUNCHER),--launcher $(LAUNCHER)) $(if $(IMAGE),--image $(IMAGE)) \
		$(if $(filter-out 1,$(NODES)),--nodes $(NODES)) $(if $(TASKS_PER_NODE),--tasks-per-node $(TASKS_PER_NODE)) \
		$(if $(GPUS_PER_NODE),--gpus-per-node $(GPUS_PER_NODE)) $(if $(PARTITION),--partition $(PARTITION)) \
		$(if $(ACCOUNT),--account $(ACCOUNT)) $(if $(TIME),--time $(TIME)) $(if $(NAMESPACE),--namespace $(NAMESPACE)) $(if $(filter 1,$(DRY_RUN)),--dry-run) \
		$(if $(filter 0,$(INGEST)),--no-ingest) $(if $(filter 1,$(NIGHTLY)),--nightly)

# Each backend's tiny size of each recipe it trains, on the CPU, natively or inside IMAGE: does the stack
# train at all (CI and the nightly's built images; a framework's image: SMOKE_BACKENDS="native <framework>").
SMOKE_RECIPES ?= llama2 gpt3 vit
SMOKE_BACKENDS ?= native $(if $(IMAGE),,$(FRAMEWORK_BACKENDS))
smoke: $(STAMP)
	@for backend in $(SMOKE_BACKENDS); do \
		recipes=$$($(VENV)/bin/jaxbench backends --trains $$backend $(SMOKE_RECIPES)) || exit 1; \
		for recipe in $$recipes; do \
			JAX_PLATFORMS=cpu $(MAKE) --no-print-directory bench MODEL=$$recipe SIZE=tiny BACKEND=$$backend \
				OUT=$(OUT)/smoke INGEST=0 $(if $(IMAGE),IMAGE=$(IMAGE)) || exit 1; \
		done; \
	done

# The nightly pipeline end to end on this machine with local stand-ins (scripts/nightly-local): a local
# registry for GHCR, an SQLite store, a folder for GitHub's issues and pull requests, a bare repository
# for main. OFFLINE=1 bumps against a local stand-in upstream instead of GitHub.
nightly-local: $(STAMP)
	scripts/nightly-local

# Three local nights (Docker, cpu flavor) whose bump adds a large package: an image-size incident opens.
nightly-size-incident: $(STAMP)
	scripts/nightly-size-incident

# A change against its base before it merges (jaxbench pr-check; .github/workflows/pr-check.yaml): BASE and
# HEAD revisions of this repository, or SOURCE=component=URL#REF (its head) with BASE the component's base ref.
pr-check: $(STAMP)
	$(VENV)/bin/jaxbench pr-check --base "$(BASE)" $(if $(HEAD),--head "$(HEAD)") $(if $(SOURCE),--source "$(SOURCE)") \
		--recipes $(or $(RECIPES),llama2:tiny) $(foreach override,$(SET),--set $(override)) \
		$(if $(filter command line environment,$(origin REPEATS)),--repeats $(REPEATS)) \
		$(if $(CPUS),--cpus $(CPUS)) --out $(OUT)

# Triage end to end offline (scripts/triage-local): a stand-in optax's slow commit and numerics-breaking commit,
# each found by the local nightly and bisected by the hand-off to `jaxbench triage`. TRIALS=N repeats each triage.
triage-local: $(STAMP)
	TRIALS=$(or $(TRIALS),1) scripts/triage-local

# Images of FLAVOR; with no Docker engine, says so and leaves the virtualenv (built from the same manifest).
build: $(STAMP)
	@$(VENV)/bin/jaxbench build --flavor $(FLAVOR) --registry $(REGISTRY) $(if $(INSTALL),--install $(INSTALL)) \
		$(if $(DATE),--date $(DATE)) $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) \
		$(if $(filter 1,$(LOCAL_BASE)),--local-base) \
		$(foreach cert,$(CA_CERTS),--ca-cert $(cert)) \
		$(if $(PIP_INDEX_URL),--pip-index-url $(PIP_INDEX_URL)) \
		$(if $(PIP_EXTRA_INDEX_URL),--pip-extra-index-url $(PIP_EXTRA_INDEX_URL)) \
		$(if $(MANIFEST),--manifest $(MANIFEST)) $(if $(RECORDS),--records $(RECORDS)) \
		$(if $(filter 0,$(RECORD)),--no-record)

# Per architecture (on a native machine of each), then once per flavor: the dated manifest list of the
# architectures in the registry, and the undated tag moved to it only when every one in ARCHES is there
# (exit 5 otherwise; containers/publish.py).
push: $(STAMP)
	@$(VENV)/bin/jaxbench push --flavor $(FLAVOR) --registry $(REGISTRY) $(if $(DATE),--date $(DATE))

ARCHES ?= amd64,arm64
publish: $(STAMP)
	@$(VENV)/bin/jaxbench publish --flavor $(FLAVOR) --registry $(REGISTRY) $(if $(DATE),--date $(DATE)) \
		--arches $(ARCHES)

pull:
	docker pull $(REGISTRY)/jax:$(FLAVOR)$(if $(DATE),-$(DATE))

# A flavor's image chain for real (default cpu; FLAVOR=jax: CUDA from PyPI), on the flavor's local Debian
# base: a private dockerd, debootstrap, make build, make bench inside, the checks of scripts/image-test.
image-test: $(STAMP)
	FLAVOR=$(FLAVOR) INSTALL=$(INSTALL) scripts/image-test

ab: $(STAMP)
	@[ -n "$(A)" ] && [ -n "$(B)" ] || { echo "make ab needs A=... and B=... (flag profile names or '--flag=value ...')"; exit 1; }
	$(VENV)/bin/jaxbench ab $(MODEL) --a="$(A)" --b="$(B)" --repeats $(REPEATS) $(if $(SIZE),--size $(SIZE)) \
		$(if $(STEPS),--steps $(STEPS)) $(foreach override,$(SET),--set $(override)) --out $(OUT)/ab

# pytest-benchmark comes with the test extras.
microbench: $(TEST_STAMP)
	$(VENV)/bin/jaxbench microbench $(if $(SIZES),--sizes $(SIZES)) $(if $(K),-k '$(K)') --out $(OUT)

# The acceptance run of a GPU machine (harness/gpucheck/), the first thing to run on a lent one: LLaMA 2 1B
# (bf16 with cuDNN attention, and fp8), GPT-3 1.3B, ViT-B/16 and the full microbenchmarks, each in a fresh
# process, in 9 minutes on one H100; results and summary.md in $(OUT)/gpu-check-<UTC time>/, nothing ingested.
# The microbenchmarks need pytest-benchmark, from the test extras.
gpu-check: $(TEST_STAMP)
	$(VENV)/bin/jaxbench gpu-check --out $(OUT) $(if $(STEPS),--steps $(STEPS))

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
	$(VENV)/bin/lint-imports
	$(VENV_PY) scripts/check-package-hosts
	$(VENV_PY) scripts/check-fork-safety .github/workflows/*.yaml
	$(VENV)/bin/hadolint containers/*.Dockerfile
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yaml
	$(VENV)/bin/actionlint -shellcheck $(VENV)/bin/shellcheck -pyflakes= .github/workflows/*.yaml

clean:
	rm -rf $(VENV) $(foreach f,$(FRAMEWORK_BACKENDS),.venv-$(f)) .pytest_cache .mypy_cache .ruff_cache *.egg-info
