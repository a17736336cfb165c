# Stages "maxtext", "levanter", "t5x": one framework on top of the jax stage, from its pinned commit (or
# its published release with INSTALL=wheel). Earlier stages' components are constraints: a framework that
# needs another jax or flax fails here, naming the conflict, instead of replacing the pinned stack.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG PLAN
ARG CA_URL=
ARG PIP_INDEX_URL=
ARG PIP_EXTRA_INDEX_URL=
COPY ${PLAN} /opt/jaxbench/plans/
RUN with-ca python3 /opt/jaxbench/install_stage.py "/opt/jaxbench/plans/$(basename "$PLAN")" \
    && rm -rf /root/.cache
