"""A pytest plugin that `jaxbench microbench` loads into its pytest process (`-p`): a benchmark interrupted
before its first timed round leaves no data, and pytest-benchmark's report then fails on it (`min()` of an
empty list) and writes nothing, losing every kernel timed before. Such a benchmark is dropped instead: it
measured nothing, and the report of an interrupted suite keeps what was measured.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/test_microbench_interrupt.py
"""

from __future__ import annotations

from collections.abc import Generator

import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None]:
    """Outside pytest-benchmark's own wrapper of this hook, which writes the JSON before it yields."""
    benchmarks = getattr(getattr(session.config, "_benchmarksession", None), "benchmarks", None)
    if benchmarks is not None:
        benchmarks[:] = [timed for timed in benchmarks if timed.stats.data]
    return (yield)
