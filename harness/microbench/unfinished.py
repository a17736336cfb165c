"""A pytest plugin that `jaxbench microbench` loads into its pytest process (`-p`): the report of an
interrupted suite keeps exactly the kernels whose test ran to its end. A kernel interrupted mid-way is
dropped: before its first timed round it has no data, and pytest-benchmark's report then fails on it (`min()`
of an empty list) and writes nothing, losing every kernel timed before; after some rounds its figures were
never checked against the reference, nor its work (FLOPs, bytes) recorded.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/harness/test_microbench_interrupt.py
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

FINISHED = pytest.StashKey[set[str]]()
"""Node ids of the tests whose call phase ended, passed or failed; Ctrl-C escapes an interrupted one's call
phase, which then reports nothing."""


def pytest_configure(config: pytest.Config) -> None:
    config.stash[FINISHED] = set()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None]:
    report = yield
    if call.when == "call":
        item.config.stash[FINISHED].add(item.nodeid)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None]:
    """Outside pytest-benchmark's own wrapper of this hook, which writes the JSON before it yields."""
    benchmarks = getattr(getattr(session.config, "_benchmarksession", None), "benchmarks", None)
    if benchmarks is not None:
        finished = session.config.stash[FINISHED]
        benchmarks[:] = [timed for timed in benchmarks if timed.fullname in finished and timed.stats.data]
    return (yield)
