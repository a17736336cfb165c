# Last stage of every flavor: every package of the `jaxbench` command (the nightly's steps included) and the
# recipes in /opt/venv, constrained to the installed components; the resolved manifest and package list the
# harness records in every result; `jaxbench` as the entry point. Results go to /results (mount a host
# folder there).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
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
COPY jaxbench/ /opt/jaxbench/src/jaxbench/
COPY recipes/ /opt/jaxbench/src/recipes/
COPY ${PLAN} /opt/jaxbench/plans/harness.json
RUN python3 /opt/jaxbench/install_stage.py --print-constraints >/tmp/constraints.txt \
    && with-ca pip install --no-cache-dir -c /tmp/constraints.txt -e /opt/jaxbench/src \
        "pytest>=8" "pytest-benchmark>=4" \
    && rm -f /tmp/constraints.txt \
    && jaxbench manifest record --plan /opt/jaxbench/plans/harness.json --stages /opt/jaxbench/stages \
        --image "$JAXBENCH_IMAGE" --revision "$JAXBENCH_GIT_COMMIT" --created "$CREATED" \
        --out /opt/jaxbench/manifest.yaml \
    && mkdir -p /results && chmod 1777 /results

ENV JAXBENCH_IMAGE=${JAXBENCH_IMAGE} \
    JAXBENCH_MANIFEST=/opt/jaxbench/manifest.yaml \
    JAXBENCH_GIT_COMMIT=${JAXBENCH_GIT_COMMIT} \
    XDG_CACHE_HOME=/tmp/cache
WORKDIR /results
ENTRYPOINT ["jaxbench"]
CMD ["--help"]
