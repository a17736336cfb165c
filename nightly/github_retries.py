"""Which failed GitHub calls are tried again, and after how long: GitHub's own rules for its rate limits
(docs.github.com, "Rate limits for the REST API": wait for `retry-after` seconds when given, else until
`x-ratelimit-reset` when `x-ratelimit-remaining` is 0, else at least a minute), and for the rest a retry only
where a second request cannot do what the first did. Pure: a response or an error in, a decision out;
nightly/github.py acts on it through core.retries.

    pytest tests/nightly/test_github_retries.py
"""

from __future__ import annotations

import email.utils

import httpx

from jaxbench.core.retries import Retries

RETRIES = Retries(attempts=5, total_s=180.0, first_wait_s=1.0, max_wait_s=60.0)
"""A GitHub call: five attempts within three minutes, a wait of at most a minute (GitHub's secondary rate
limit asks for one); a primary rate limit resetting later than that fails at once, saying when."""

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"})
"""Methods a repeat of which changes nothing more: RFC 9110's idempotent ones, and PATCH as RestRepository
uses it (update_issue and update_pull_request set fields to given values). Not POST: a repeated create_issue
or add_comment would post twice."""

SECONDARY_LIMIT_WAIT_S = 60.0
"""GitHub: after a secondary rate limit with neither header, "wait for at least one minute"."""


def rate_limited(response: httpx.Response) -> bool:
    """A 429, or a 403 that is a rate limit rather than a missing permission. GitHub refused the request
    without acting on it, so any method may be sent again."""
    if response.status_code == 429:
        return True
    if response.status_code != 403:
        return False
    headers = response.headers
    return (
        headers.get("x-ratelimit-remaining") == "0"
        or "retry-after" in headers
        or "rate limit" in response.text.lower()
    )


def retryable_response(method: str, response: httpx.Response) -> bool:
    """Whether another attempt may get another answer: a rate limit (any method), or a server error of an
    idempotent request (a POST answered 502 may have created its issue). 501 Not Implemented never will."""
    if rate_limited(response):
        return True
    return response.status_code >= 500 and response.status_code != 501 and method in IDEMPOTENT


def retryable_error(method: str, error: httpx.HTTPError) -> bool:
    """Whether a request that got no answer may be sent again: any method when no connection was made
    (nothing reached GitHub), an idempotent one after any other network failure (a POST whose answer was lost
    may have been done)."""
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
        return True
    return isinstance(error, httpx.TransportError) and method in IDEMPOTENT


def requested_wait_s(response: httpx.Response, now: float) -> float | None:
    """How long GitHub asks to wait before the next attempt, in seconds from `now` (Unix time); None when it
    does not say (back off). A `Retry-After` of seconds or an HTTP date, else the rate limit's reset (one
    second added: the reset is a whole second, and clocks differ), else a minute for a secondary limit."""
    headers = response.headers
    retry_after = headers.get("retry-after", "").strip()
    if retry_after.isdigit():
        return float(retry_after)
    if retry_after:
        try:
            return max(email.utils.parsedate_to_datetime(retry_after).timestamp() - now, 0.0)
        except (TypeError, ValueError):
            pass  # an unreadable date: as if absent
    reset = headers.get("x-ratelimit-reset", "").strip()
    if headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
        return max(int(reset) - now, 0.0) + 1.0
    if rate_limited(response):
        return SECONDARY_LIMIT_WAIT_S
    return None
