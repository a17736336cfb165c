"""GitHub calls tried again (nightly/github_retries.py, core/retries.py): the policy on its own (which answers
retry, how long GitHub asks to wait), then RestRepository against a real HTTP server on 127.0.0.1 that fails
the first attempts. Waits are recorded, not slept.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/nightly/test_github_retries.py
"""

from __future__ import annotations

import dataclasses
import email.utils
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from jaxbench.nightly import github_retries
from jaxbench.nightly.github import GitHubError, RestRepository
from jaxbench.nightly.github_retries import (
    RETRIES,
    rate_limited,
    requested_wait_s,
    retryable_error,
    retryable_response,
)

REPO = "jax-ml/jaxbench"
NOW = 1_800_000_000.0
ISSUE = {"number": 1, "title": "t", "body": "b", "state": "open", "labels": []}

# The policy -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers", "message", "expected"),
    [
        (429, {}, "", True),
        (403, {"x-ratelimit-remaining": "0"}, "API rate limit exceeded", True),
        (403, {"retry-after": "30"}, "", True),
        (403, {}, "You have exceeded a secondary rate limit", True),
        (403, {"x-ratelimit-remaining": "4999"}, "Resource not accessible by integration", False),
        (503, {}, "", False),
    ],
)
def test_rate_limits_are_told_from_missing_permissions(
    status: int, headers: dict[str, str], message: str, expected: bool
) -> None:
    assert rate_limited(httpx.Response(status, headers=headers, json={"message": message})) is expected


@pytest.mark.parametrize(
    ("method", "status", "expected"),
    [
        ("GET", 503, True),
        ("GET", 500, True),
        ("PATCH", 502, True),  # every PATCH of RestRepository sets fields to values
        ("POST", 503, False),  # it may have created the issue
        ("POST", 429, True),  # refused, not done
        ("GET", 501, False),
        ("GET", 404, False),
        ("PATCH", 422, False),
        ("GET", 401, False),
    ],
)
def test_which_answers_are_retried(method: str, status: int, expected: bool) -> None:
    assert retryable_response(method, httpx.Response(status, json={"message": "x"})) is expected


REQUEST = httpx.Request("GET", "https://api.github.test/")


@pytest.mark.parametrize(
    ("method", "error", "expected"),
    [
        ("POST", httpx.ConnectError("refused", request=REQUEST), True),  # nothing reached GitHub
        ("POST", httpx.ConnectTimeout("slow", request=REQUEST), True),
        ("POST", httpx.ReadTimeout("no answer", request=REQUEST), False),  # the issue may exist now
        ("GET", httpx.ReadTimeout("no answer", request=REQUEST), True),
        ("GET", httpx.RemoteProtocolError("closed", request=REQUEST), True),
        ("GET", httpx.TooManyRedirects("loop", request=REQUEST), False),
    ],
)
def test_which_network_failures_are_retried(method: str, error: httpx.HTTPError, expected: bool) -> None:
    assert retryable_error(method, error) is expected


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (429, {"retry-after": "7"}, 7.0),
        (503, {"retry-after": email.utils.formatdate(NOW + 30, usegmt=True)}, 30.0),
        (429, {"retry-after": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 12)}, 13.0),
        (429, {}, github_retries.SECONDARY_LIMIT_WAIT_S),
        (429, {"retry-after": "soon"}, github_retries.SECONDARY_LIMIT_WAIT_S),
        (503, {"retry-after": "soon"}, None),
        (503, {}, None),
    ],
)
def test_how_long_github_asks_to_wait(status: int, headers: dict[str, str], expected: float | None) -> None:
    assert requested_wait_s(httpx.Response(status, headers=headers, json={}), NOW) == expected


# Against a local server -------------------------------------------------------------------------------------

Answer = tuple[int, dict[str, str], Any]


@dataclasses.dataclass
class FlakyGitHub:
    """An HTTP server on 127.0.0.1 answering each request with the next of `answers` (the last repeats)."""

    url: str
    answers: list[Answer] = dataclasses.field(default_factory=list)
    seen: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def answer(self, method: str, path: str) -> Answer:
        self.seen.append((method, path))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.fixture
def server() -> Iterator[FlakyGitHub]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _reply(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, headers, document = flaky.answer(self.command, self.path)
            body = json.dumps(document).encode()
            self.send_response(status)
            for name, value in {**headers, "Content-Type": "application/json"}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PATCH = _reply

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    flaky = FlakyGitHub(f"http://127.0.0.1:{httpd.server_address[1]}")
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield flaky
    finally:
        httpd.shutdown()
        httpd.server_close()


@dataclasses.dataclass
class Client:
    rest: RestRepository
    waits: list[float]
    lines: list[str]


def client(url: str) -> Client:
    waits: list[float] = []
    lines: list[str] = []
    retries = dataclasses.replace(RETRIES, sleep=waits.append, notify=lines.append)
    # trust_env=False: no proxy of this machine's environment between the client and 127.0.0.1
    http_client = httpx.Client(timeout=5.0, trust_env=False)
    return Client(
        RestRepository(REPO, "ghs_test", api_url=url, client=http_client, retries=retries), waits, lines
    )


def test_server_errors_are_retried_until_github_answers(server: FlakyGitHub) -> None:
    server.answers = [(503, {}, {"message": "Service Unavailable"})] * 2 + [(200, {}, [ISSUE])]
    github = client(server.url)
    assert [i.number for i in github.rest.list_issues("x")] == [1]
    assert [method for method, _ in server.seen] == ["GET"] * 3
    assert len(github.waits) == 2 and 1.0 <= github.waits[0] <= 2.0  # backoff: 1 s, plus jitter
    assert github.lines[0].startswith(f"GitHub GET /repos/{REPO}/issues: 503 Service Unavailable; attempt 2")


def test_retry_after_is_waited_for(server: FlakyGitHub) -> None:
    server.answers = [(429, {"Retry-After": "1"}, {"message": "slow down"}), (200, {}, [ISSUE])]
    github = client(server.url)
    assert len(github.rest.list_issues("x")) == 1
    assert (len(server.seen), github.waits) == (2, [1.0])


def test_a_rate_limited_post_waits_for_the_reset_and_is_sent_again(server: FlakyGitHub) -> None:
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 5)}
    server.answers = [(403, reset, {"message": "API rate limit exceeded"}), (201, {}, ISSUE)]
    github = client(server.url)
    assert github.rest.create_issue("t", "b", []).number == 1
    assert server.seen == [("POST", f"/repos/{REPO}/issues")] * 2
    assert 4.0 <= github.waits[0] <= 7.0  # until the reset, and a second


@pytest.mark.parametrize("status", [404, 422])
def test_refusals_are_not_retried(server: FlakyGitHub, status: int) -> None:
    server.answers = [(status, {}, {"message": "No"}), (200, {}, ISSUE)]
    github = client(server.url)
    with pytest.raises(GitHubError, match=rf"^GitHub PATCH /repos/{REPO}/issues/3: {status} No"):
        github.rest.update_issue(3, state="closed")
    assert (len(server.seen), github.waits) == (1, [])


def test_the_attempt_bound_holds(server: FlakyGitHub) -> None:
    server.answers = [(502, {}, {"message": "Bad Gateway"})]
    github = client(server.url)
    with pytest.raises(
        GitHubError, match=rf"^GitHub GET /repos/{REPO}/issues: 502 Bad Gateway \(5 attempts\)$"
    ):
        github.rest.list_issues("x")
    assert (len(server.seen), len(github.waits)) == (RETRIES.attempts, RETRIES.attempts - 1)


def test_a_post_is_not_retried_on_a_server_error(server: FlakyGitHub) -> None:
    server.answers = [(502, {}, {"message": "Bad Gateway"}), (201, {}, ISSUE)]
    github = client(server.url)
    with pytest.raises(GitHubError, match="502 Bad Gateway$"):
        github.rest.create_issue("t", "b", [])
    assert server.seen == [("POST", f"/repos/{REPO}/issues")]


def test_a_rate_limit_resetting_past_the_longest_wait_fails_at_once_saying_when(server: FlakyGitHub) -> None:
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 3600)}
    server.answers = [(403, reset, {"message": "API rate limit exceeded"})]
    github = client(server.url)
    with pytest.raises(
        GitHubError, match=r"403 API rate limit exceeded; rate limited; GitHub asks to wait 3\d\d\d s"
    ):
        github.rest.list_issues("x")
    assert (len(server.seen), github.waits) == (1, [])


def test_a_refused_connection_is_retried_even_for_a_post() -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    github = client(f"http://127.0.0.1:{port}")
    with pytest.raises(GitHubError, match=r"ConnectError: .* \(5 attempts\)$"):
        github.rest.create_issue("t", "b", [])
    assert len(github.waits) == RETRIES.attempts - 1
