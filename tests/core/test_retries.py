"""core.retries: a transient failure is tried again up to the bound in attempts and in time, waiting what the
service asked for or else backing off exponentially; anything else ends the call at once.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_retries.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from jaxbench.core.retries import GaveUp, Retries, Transient


def policy(waits: list[float], lines: list[str] | None = None, **bounds: float) -> Retries:
    """A policy that records its waits instead of sleeping."""
    settings: dict[str, float] = {"attempts": 5, "total_s": 600.0, "first_wait_s": 1.0, "max_wait_s": 60.0}
    settings |= bounds
    return Retries(
        int(settings["attempts"]),
        settings["total_s"],
        settings["first_wait_s"],
        settings["max_wait_s"],
        sleep=waits.append,
        notify=(lines if lines is not None else []).append,
    )


def failing(times: int, after_s: float | None = None) -> tuple[Callable[[], str], list[int]]:
    """An attempt that fails transiently `times` times, then answers "ok"; and the list of its calls."""
    calls: list[int] = []

    def attempt() -> str:
        calls.append(len(calls) + 1)
        if len(calls) <= times:
            raise Transient(f"503 on call {len(calls)}", after_s)
        return "ok"

    return attempt, calls


def test_a_transient_failure_is_retried_with_growing_jittered_waits() -> None:
    waits: list[float] = []
    lines: list[str] = []
    attempt, calls = failing(3)
    assert policy(waits, lines).run(attempt) == "ok"
    assert calls == [1, 2, 3, 4]
    # 1, 2, 4 s of backoff, each with up to first_wait_s (1 s) of jitter
    assert [int(w) for w in waits] == [1, 2, 4]
    assert all(0 <= w - base <= 1.0 for w, base in zip(waits, [1, 2, 4], strict=True))
    assert lines[0].startswith("503 on call 1; attempt 2 of 5 in ")


def test_the_services_wait_is_taken_as_asked() -> None:
    waits: list[float] = []
    attempt, calls = failing(2, after_s=7.0)
    assert policy(waits).run(attempt) == "ok"
    assert (calls, waits) == ([1, 2, 3], [7.0, 7.0])


def test_backoff_stops_growing_at_the_longest_wait() -> None:
    waits: list[float] = []
    attempt, _ = failing(6)
    policy(waits, attempts=7, first_wait_s=4.0, max_wait_s=10.0).run(attempt)
    assert waits[2:] == [10.0, 10.0, 10.0, 10.0]


def test_the_attempt_bound_holds_and_the_message_counts_them() -> None:
    waits: list[float] = []
    attempt, calls = failing(100)
    with pytest.raises(GaveUp, match=r"^503 on call 4 \(4 attempts\)$") as caught:
        policy(waits, attempts=4).run(attempt)
    assert calls == [1, 2, 3, 4] and len(waits) == 3
    assert caught.value.attempts == 4 and caught.value.last.args == ("503 on call 4",)


def test_the_time_bound_holds() -> None:
    """With real (tiny) sleeps: no wait would end past total_s, however many attempts are left."""
    attempt, calls = failing(100, after_s=0.02)
    bounded = Retries(attempts=1000, total_s=0.1, first_wait_s=0.01, max_wait_s=1.0)
    start = time.monotonic()
    with pytest.raises(GaveUp):
        bounded.run(attempt)
    assert time.monotonic() - start < 0.5  # 0.1 s and a last sleep's overshoot, on a loaded machine
    assert 2 <= len(calls) <= 6


def test_a_service_asking_for_more_than_the_longest_wait_is_not_waited_for() -> None:
    waits: list[float] = []
    attempt, calls = failing(1, after_s=3600.0)
    with pytest.raises(GaveUp, match=r"\(1 attempt\)"):
        policy(waits, max_wait_s=60.0).run(attempt)
    assert (calls, waits) == ([1], [])


def test_any_other_exception_ends_the_call_at_once() -> None:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        raise ValueError("404 Not Found")

    with pytest.raises(ValueError, match="404"):
        policy([]).run(attempt)
    assert calls == [1]
