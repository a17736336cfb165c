# Stage "jax": XLA + JAX (jaxlib and, on CUDA, the plugin built from the pinned XLA and JAX commits, or the
# published wheels of the pinned release with INSTALL=wheel), TransformerEngine on CUDA, Flax, Optax, Orbax.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG PLAN
ARG CA_URL=
ARG PIP_INDEX_URL=
ARG PIP_EXTRA_INDEX_URL=
# Compute capabilities of a source-built jaxlib: Ampere, Hopper, Blackwell.
ARG CUDA_COMPUTE_CAPABILITIES=sm_80,sm_90,sm_100
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV NVTE_FRAMEWORK=jax
COPY ${PLAN} /opt/jaxbench/plans/jax.json

# A source build of jaxlib needs clang and lld (jax's build script downloads Bazel itself); wheels do not.
# hadolint ignore=DL3008
RUN if grep -q '"build": "jaxlib"' /opt/jaxbench/plans/jax.json \
        && grep -q '"install": "source"' /opt/jaxbench/plans/jax.json; then \
        apt-get update && apt-get install -y --no-install-recommends clang lld \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && CUDA_COMPUTE_CAPABILITIES=$CUDA_COMPUTE_CAPABILITIES \
        with-ca python3 /opt/jaxbench/install_stage.py /opt/jaxbench/plans/jax.json \
    && rm -rf /opt/src/*/dist /root/.cache
