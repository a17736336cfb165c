"""Bounded retries of calls to services outside jaxbench (GitHub's API, a container registry), through
tenacity: an attempt that fails in a way the next one may not raises `Transient`; `Retries.run` waits and
tries again, up to a number of attempts and a total time, and then raises `GaveUp` with the last message and
the number of attempts made. Which failures are transient is the caller's (nightly/github_retries.py,
containers/registry_retries.py); any other exception ends the call at once.

The wait before each retry is what the service asked for (`Transient.after_s`, from Retry-After or a rate
limit's reset) or else exponential backoff with jitter; a service asking for longer than `max_wait_s` is not
waited for at all (a GitHub rate limit resetting in 40 minutes fails now, with that said).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_retries.py
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable

import tenacity


class Transient(Exception):
    """An attempt failed in a way the next one may not (a reset connection, a 503, a rate limit). `message`
    is the failure as the user would read it; `after_s` is how long the service asked to wait, None to back
    off."""

    def __init__(self, message: str, after_s: float | None = None) -> None:
        super().__init__(message)
        self.after_s = after_s


class GaveUp(Exception):
    """Every attempt failed transiently, or the next wait would not fit: the last message and the count."""

    def __init__(self, last: Transient, attempts: int) -> None:
        attempts_text = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        super().__init__(f"{last} ({attempts_text})")
        self.last = last
        self.attempts = attempts


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Retries:
    """How a call is retried; `sleep` and `notify` (a line per retry, to stderr by default) are for tests."""

    attempts: int
    """At most this many attempts, the first included."""
    total_s: float
    """No wait ends later than this many seconds after the first attempt began."""
    first_wait_s: float
    """The first backoff; each next one doubles, and each gets up to this much again of random jitter."""
    max_wait_s: float
    """The longest single wait: backoff stops growing here, and a service asking for more is not retried."""
    sleep: Callable[[float], None] = time.sleep
    notify: Callable[[str], None] = _to_stderr

    def run[T](self, attempt: Callable[[], T]) -> T:
        """`attempt()`'s result; retried while it raises Transient, GaveUp when out of attempts or time."""
        bounds = tenacity.stop_after_attempt(self.attempts) | tenacity.stop_before_delay(self.total_s)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(Transient),
            wait=self._wait,
            stop=lambda state: bounds(state) or self._asked_too_long(state),
            sleep=self.sleep,
            before_sleep=self._notify,
        )
        try:
            return retrying(attempt)
        except tenacity.RetryError as error:
            last = error.last_attempt.exception()
            assert isinstance(last, Transient)  # the only exception retried
            raise GaveUp(last, error.last_attempt.attempt_number) from None

    def _wait(self, state: tenacity.RetryCallState) -> float:
        asked = _transient(state).after_s
        if asked is not None:
            return max(asked, 0.0)
        backoff = tenacity.wait_exponential(multiplier=self.first_wait_s, max=self.max_wait_s)
        jitter = tenacity.wait_random(0, self.first_wait_s)
        return min(backoff(state) + jitter(state), self.max_wait_s)

    def _asked_too_long(self, state: tenacity.RetryCallState) -> bool:
        asked = _transient(state).after_s
        return asked is not None and asked > self.max_wait_s

    def _notify(self, state: tenacity.RetryCallState) -> None:
        self.notify(
            f"{_transient(state)}; attempt {state.attempt_number + 1} of {self.attempts}"
            f" in {state.upcoming_sleep:.1f} s"
        )


def _transient(state: tenacity.RetryCallState) -> Transient:
    error = state.outcome.exception() if state.outcome is not None else None
    assert isinstance(error, Transient)  # retry, wait and stop only see the attempts that raised it
    return error
