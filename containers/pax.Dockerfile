# Stage "pax" (legacy): Paxml and Praxis 1.4.0, their last release, need jax 0.4.26 and Python 3.10, which
# cannot share /opt/venv with the current stack. They get their own environment, /opt/pax, with a
# Python 3.10 (the manifest's stages.pax.python) that uv installs; the harness stays in /opt/venv and finds
# Pax's interpreter through JAXBENCH_PAX_PYTHON.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG PLAN
ARG CA_URL=
ARG PIP_INDEX_URL=
ARG PIP_EXTRA_INDEX_URL=
ARG STAGE_PYTHON
ARG UV_VERSION=0.9.5
ENV UV_PYTHON_INSTALL_DIR=/opt/pax/python \
    JAXBENCH_PAX_PYTHON=/opt/pax/venv/bin/python
COPY ${PLAN} /opt/jaxbench/plans/pax.json
RUN with-ca pip install --no-cache-dir "uv==${UV_VERSION}" \
    && with-ca uv venv --seed --python "$STAGE_PYTHON" /opt/pax/venv \
    && with-ca python3 /opt/jaxbench/install_stage.py --python "$JAXBENCH_PAX_PYTHON" /opt/jaxbench/plans/pax.json \
    && rm -rf /root/.cache
