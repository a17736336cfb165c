"""The self-bench: jaxbench's own speed as a pytest-benchmark suite. `make self-bench` runs it, ingests its
JSON into a store of its own and prints that store's report: the same detection judges these series as the
recipes'. Every benchmark times fixed rounds (pedantic, one warm-up) so that nights compare; rates and
deterministic counts go into extra_info (results/pytest_benchmark.py: EXTRA_INFO_METRICS). Not part of
`make test` (pyproject.toml: testpaths). More: docs/self-bench.md.

    make self-bench
    .venv/bin/python -m pytest benchmarks/self [--self-size small] --benchmark-json out.json
"""

from __future__ import annotations

import os

import pytest

from benchmarks.self.sizes import SIZES, Size

os.environ.setdefault("JAX_PLATFORMS", "cpu")

OTAVA_ENV = "OTAVA_PYTHON"
"""An interpreter of a virtualenv with apache-otava (it pins its own numpy): then detection is also timed
against Otava's on the same series; else that benchmark is skipped."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--self-size",
        choices=list(SIZES),
        default="full",
        help="how much work each benchmark does (benchmarks/self/sizes.py): full (make self-bench) or small",
    )


@pytest.fixture(scope="session")
def size(pytestconfig: pytest.Config) -> Size:
    return SIZES[str(pytestconfig.getoption("--self-size"))]


@pytest.fixture(scope="session")
def otava_python() -> str:
    python = os.environ.get(OTAVA_ENV)
    if not python:
        pytest.skip(f"{OTAVA_ENV} names no interpreter with apache-otava")
    return python
