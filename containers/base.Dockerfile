# Stage "base": the OS, Python and the build tools every later stage uses, and the stage installer.
# BASE_IMAGE and PYTHON_VERSION come from the flavor in containers/manifest.yaml, the one place that names
# images: NVIDIA's CUDA devel image for the GPU flavors by default, or the flavor's local base (Debian, made
# here by scripts/os-base-image: what the tests and CI build on).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG PYTHON_VERSION
# Taken by every stage; the base stage installs nothing with pip.
ARG CA_URL=
ARG PIP_INDEX_URL=
ARG PIP_EXTRA_INDEX_URL=
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8

# Package versions come with the base image's release; pinning them here would break every base bump.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates git patch python3 python3-venv python3-dev \
        build-essential \
    && rm -rf /var/lib/apt/lists/* \
    && found=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")') \
    && if [ "$found" != "$PYTHON_VERSION" ]; then \
        echo "BASE_IMAGE has Python $found; the manifest's flavor expects $PYTHON_VERSION" >&2; exit 1; fi \
    && python3 -m venv /opt/venv

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH
COPY containers/with-ca /usr/local/bin/with-ca
COPY containers/install_stage.py /opt/jaxbench/install_stage.py
COPY containers/patches/ /opt/jaxbench/patches/
