# Last stage of every flavor, in two parts.
# "build": every package of the `jaxbench` command (the nightly's steps included) and the recipes in
# /opt/venv, constrained to the installed components; the resolved manifest and package list the harness
# records in every result, written after slim.py took out what only built something (build requirements,
# static libraries, source checkouts).
# "runtime": the flavor's runtime base (no compilers, headers or build tools) with Python and /opt copied
# from "build": the image that ships. Results go to /results (mount a host folder there).
ARG BASE_IMAGE
ARG RUNTIME_IMAGE
FROM ${BASE_IMAGE} AS build
ARG PLAN
ARG CA_URL=
ARG PIP_INDEX_URL=
ARG PIP_EXTRA_INDEX_URL=
ARG JAXBENCH_IMAGE
ARG JAXBENCH_GIT_COMMIT=
ARG CREATED=
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY pyproject.toml README.md /opt/jaxbench/src/
COPY core/ /opt/jaxbench/src/core/
COPY harness/ /opt/jaxbench/src/harness/
COPY results/ /opt/jaxbench/src/results/
COPY containers/ /opt/jaxbench/src/containers/
COPY nightly/ /opt/jaxbench/src/nightly/
COPY prcheck/ /opt/jaxbench/src/prcheck/
COPY triage/ /opt/jaxbench/src/triage/
COPY backfill/ /opt/jaxbench/src/backfill/
COPY jaxbench/ /opt/jaxbench/src/jaxbench/
COPY recipes/ /opt/jaxbench/src/recipes/
COPY containers/slim.py /opt/jaxbench/slim.py
COPY ${PLAN} /opt/jaxbench/plans/harness.json
RUN python3 /opt/jaxbench/install_stage.py --print-constraints >/tmp/constraints.txt \
    && with-ca pip install --no-cache-dir -c /tmp/constraints.txt -e /opt/jaxbench/src \
        "pytest>=8" "pytest-benchmark>=4" \
    && rm -f /tmp/constraints.txt \
    && python3 /opt/jaxbench/slim.py \
    && jaxbench manifest record --plan /opt/jaxbench/plans/harness.json --stages /opt/jaxbench/stages \
        --image "$JAXBENCH_IMAGE" --revision "$JAXBENCH_GIT_COMMIT" --created "$CREATED" \
        --out /opt/jaxbench/manifest.yaml \
    && python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' >/opt/jaxbench/python-version

FROM ${RUNTIME_IMAGE} AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8
# /opt/venv's interpreter is the runtime base's python3: the same distribution release as the build base,
# so the same Python (checked below against what the build stage recorded).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates python3 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/ /opt/
RUN found=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")') \
    && if [ "$found" != "$(cat /opt/jaxbench/python-version)" ]; then \
        echo "RUNTIME_IMAGE has Python $found; the build stage's was $(cat /opt/jaxbench/python-version)" >&2; \
        exit 1; fi \
    && mkdir -p /results && chmod 1777 /results
# Declared where they are used: a build argument's value is part of the cache key of every RUN step after
# it, and these change with every build (the dated tag, the commit).
ARG JAXBENCH_IMAGE
ARG JAXBENCH_GIT_COMMIT=
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    JAXBENCH_IMAGE=${JAXBENCH_IMAGE} \
    JAXBENCH_MANIFEST=/opt/jaxbench/manifest.yaml \
    JAXBENCH_GIT_COMMIT=${JAXBENCH_GIT_COMMIT} \
    XDG_CACHE_HOME=/tmp/cache
WORKDIR /results
ENTRYPOINT ["jaxbench"]
CMD ["--help"]
