"""The garbage collector paused around bulk reads, and left as it was found.

.venv/bin/python -m pytest -q tests/core/test_collector.py
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from jaxbench.core.collector import collector_paused


@pytest.fixture(autouse=True)
def _restore_collector() -> object:
    enabled = gc.isenabled()
    yield None
    (gc.enable if enabled else gc.disable)()


def test_the_collector_is_paused_inside_and_back_after_even_on_an_error() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("a failed read")
    assert gc.isenabled()


def test_a_collector_paused_by_the_caller_stays_paused_and_nested_pauses_keep_the_outer_one() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()
    gc.enable()

    @collector_paused()
    def inner() -> bool:
        return gc.isenabled()

    with collector_paused():
        assert inner() is False
        assert not gc.isenabled()  # the inner block's end does not resume what the outer one paused
    assert gc.isenabled()


class _Seen(Exception):
    pass


def test_the_stores_bulk_reads_run_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    from jaxbench.results import batch, history

    seen: list[bool] = []

    def record(*args: object, **kwargs: object) -> None:
        seen.append(gc.isenabled())
        raise _Seen

    monkeypatch.setattr(history, "quarantined_runs", record)  # called midway through reading the histories
    monkeypatch.setattr(batch, "read_result_file", record)  # called for each file before any check
    monkeypatch.setattr(history, "select", lambda *columns: _Query())
    gc.enable()
    with pytest.raises(_Seen):
        history.load_history_views(_Session())  # type: ignore[arg-type]
    with pytest.raises(_Seen):
        batch.ingest(None, [Path("result.json")])  # type: ignore[arg-type]
    assert seen == [False, False] and gc.isenabled()


class _Query:
    def order_by(self, *args: object) -> _Query:
        return self


class _Session:
    def execute(self, query: object) -> _Session:
        return self

    def scalars(self) -> _Session:
        return self

    def all(self) -> list[object]:
        return []

    def __iter__(self) -> object:
        return iter([])
