"""The few GitHub calls the nightly makes (issues for incidents, one pull request for a bump that cannot
land), behind one Protocol: the REST API through httpx, or a folder of JSON files standing in for it where
there is no GitHub (`make nightly-local`, tests). The REST calls are retried as nightly/github_retries.py
decides: rate limits, network failures and server errors, a POST only where GitHub cannot have acted on it.

    pytest tests/nightly/test_github_repository.py tests/nightly/test_github_retries.py
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx

from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.core.retries import GaveUp, Retries, Transient
from jaxbench.nightly import github_retries
from jaxbench.results.alert_plan import TrackedIssue

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
TIMEOUT_S = 30.0
PER_PAGE = 100
"""GitHub's largest page."""

# GitHub's rules: owner up to 39 characters of letters, digits and inner hyphens; name up to 100 of [\w.-].
_REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?/[A-Za-z0-9._-]{1,100}")
_STATES = ("open", "closed")
_STATE_REASONS = ("completed", "not_planned", "reopened")


class GitHubError(ExternalFailure):
    """A call to GitHub (or to the folder standing in for it) failed; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    head_branch: str
    title: str
    body: str


class GitHubRepository(Protocol):
    def list_issues(self, label: str) -> list[TrackedIssue]:
        """Issues with `label` in every state, all pages, pull requests excluded, by number."""
        ...

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> TrackedIssue: ...

    def update_issue(
        self,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
        state_reason: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> TrackedIssue:
        """Changes only what is given; `labels` replaces the issue's labels."""
        ...

    def add_comment(self, number: int, body: str) -> None: ...

    def find_pull_request(self, head_branch: str) -> PullRequest | None:
        """The open pull request from `head_branch` of this repository, if any."""
        ...

    def create_pull_request(
        self, head_branch: str, base_branch: str, title: str, body: str
    ) -> PullRequest: ...

    def update_pull_request(self, number: int, title: str, body: str) -> PullRequest: ...


def repository_from(repo: str | None, directory: Path | None, environ: Mapping[str, str]) -> GitHubRepository:
    """`repo` (owner/name, through the REST API with GITHUB_TOKEN) or `directory`, exactly one of them."""
    if (repo is None) == (directory is None):
        raise InvalidInput("give either --repo owner/name (GitHub) or --github-dir DIR (a local stand-in)")
    if directory is not None:
        return DirectoryRepository(directory)
    assert repo is not None
    return rest_repository(repo, environ)


def rest_repository(repo: str, environ: Mapping[str, str]) -> RestRepository:
    """`repo` through the REST API, with GITHUB_TOKEN (and GITHUB_API_URL, set on GitHub Enterprise)."""
    token = environ.get("GITHUB_TOKEN", "").strip()
    if not token:
        raise InvalidInput(
            f"--repo {repo}: GITHUB_TOKEN is not set (in a workflow: GITHUB_TOKEN: ${{{{ github.token }}}}"
            " in env, with permissions issues: write and pull-requests: write)"
        )
    return RestRepository(repo, token, api_url=environ.get("GITHUB_API_URL") or DEFAULT_API_URL)


class RestRepository:
    """GitHub's REST API. `client` and `retries` are for tests (an httpx.MockTransport, no sleeping); by
    default a client is made here, and calls are retried as github_retries.RETRIES says."""

    def __init__(
        self,
        repo: str,
        token: str,
        *,
        api_url: str = DEFAULT_API_URL,
        client: httpx.Client | None = None,
        retries: Retries = github_retries.RETRIES,
    ) -> None:
        if not _REPO.fullmatch(repo):
            raise InvalidInput(f"--repo {repo!r}: expected owner/name, e.g. jax-ml/jaxbench")
        if not api_url.startswith(("https://", "http://")):
            raise InvalidInput(f"GITHUB_API_URL {api_url!r}: expected an http(s) URL")
        self.repo = repo
        self._api = api_url.rstrip("/")
        self._client = client or httpx.Client(timeout=TIMEOUT_S)
        self._retries = retries
        self._headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "jaxbench-nightly",
        }

    def list_issues(self, label: str) -> list[TrackedIssue]:
        params = {"labels": label, "state": "all", "per_page": str(PER_PAGE)}
        items = self._pages(f"/repos/{self.repo}/issues", params)
        # The issues endpoint returns pull requests too; they are the items with a "pull_request" key.
        issues = [_issue(item) for item in items if "pull_request" not in item]
        return sorted(issues, key=lambda i: i.number)

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> TrackedIssue:
        payload = {"title": title, "body": body, "labels": list(labels)}
        return _issue(self._call("POST", f"/repos/{self.repo}/issues", payload))

    def update_issue(
        self,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
        state_reason: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> TrackedIssue:
        fields = {"title": title, "body": body, "state": state, "state_reason": state_reason}
        payload: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
        if labels is not None:
            payload["labels"] = list(labels)
        return _issue(self._call("PATCH", f"/repos/{self.repo}/issues/{number}", payload))

    def add_comment(self, number: int, body: str) -> None:
        self._call("POST", f"/repos/{self.repo}/issues/{number}/comments", {"body": body})

    def find_pull_request(self, head_branch: str) -> PullRequest | None:
        owner = self.repo.split("/")[0]
        params = {"state": "open", "head": f"{owner}:{head_branch}", "per_page": str(PER_PAGE)}
        pulls = [_pull(p) for p in self._pages(f"/repos/{self.repo}/pulls", params)]
        matching = sorted((p for p in pulls if p.head_branch == head_branch), key=lambda p: p.number)
        return matching[0] if matching else None

    def create_pull_request(self, head_branch: str, base_branch: str, title: str, body: str) -> PullRequest:
        payload = {"title": title, "head": head_branch, "base": base_branch, "body": body}
        return _pull(self._call("POST", f"/repos/{self.repo}/pulls", payload))

    def update_pull_request(self, number: int, title: str, body: str) -> PullRequest:
        payload = {"title": title, "body": body}
        return _pull(self._call("PATCH", f"/repos/{self.repo}/pulls/{number}", payload))

    def latest_artifact(self, name: str, branch: str) -> int | None:
        """The id of the newest unexpired artifact `name` uploaded by a run on `branch` (not by a trial run
        on another branch), or None."""
        params = {"name": name, "per_page": str(PER_PAGE)}
        document = self._send(
            "GET", f"{self._api}/repos/{self.repo}/actions/artifacts", "artifacts", params=params
        )
        artifacts = [
            a
            for a in document.json().get("artifacts", [])
            if not a.get("expired") and (a.get("workflow_run") or {}).get("head_branch") == branch
        ]
        newest = max(artifacts, key=lambda a: a["created_at"], default=None)
        return None if newest is None else int(newest["id"])

    def download_artifact(self, artifact_id: int) -> bytes:
        """The artifact's zip. GitHub answers with a redirect to a short-lived storage URL, fetched without
        the token."""
        path = f"/repos/{self.repo}/actions/artifacts/{artifact_id}/zip"
        response = self._send("GET", self._api + path, path)
        if response.is_redirect:
            storage = response.headers["location"]
            response = self._send("GET", storage, f"{path}: downloading", headers={}, follow_redirects=True)
        return response.content

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        response = self._send(method, self._api + path, path, json=payload)
        result: dict[str, Any] = response.json()
        return result

    def _pages(self, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        url: str | None = self._api + path
        query: dict[str, str] | None = params
        while url is not None:
            response = self._send("GET", url, path, params=query)
            items += response.json()
            url = response.links.get("next", {}).get("url")
            query = None  # the next link carries the query, page number included
            if url is not None and not url.startswith(self._api + "/"):
                # The token goes with every request: never to a host a header pointed to.
                raise GitHubError(f"GitHub GET {path}: next page {url!r} is not under {self._api}")
        return items

    def _send(self, method: str, url: str, path: str, **kwargs: Any) -> httpx.Response:
        """The response to one call, retried while it fails transiently; GitHubError when it fails for good.
        `headers` replaces the token's headers (a signed storage URL gets none)."""
        headers = kwargs.pop("headers", self._headers)

        def attempt() -> httpx.Response:
            try:
                response = self._client.request(method, url, headers=headers, **kwargs)
            except httpx.HTTPError as error:
                message = f"GitHub {method} {path}: {type(error).__name__}: {error}"
                if github_retries.retryable_error(method, error):
                    raise Transient(message) from None
                raise GitHubError(message) from None
            if not response.is_error:
                return response
            message = _error_message(method, path, response)
            if not github_retries.retryable_response(method, response):
                raise GitHubError(message)
            wait_s = github_retries.requested_wait_s(response, time.time())
            raise Transient(
                message if wait_s is None else f"{message}; GitHub asks to wait {wait_s:.0f} s", wait_s
            )

        try:
            return self._retries.run(attempt)
        except GaveUp as error:
            raise GitHubError(str(error)) from None


def _error_message(method: str, path: str, response: httpx.Response) -> str:
    try:
        document = response.json()
    except ValueError:
        document = None
    details: list[str] = []
    if isinstance(document, dict):
        message = str(document.get("message") or "")
        errors = document.get("errors")
        if isinstance(errors, list):  # a 422's field errors, e.g. {"resource": "Issue", "code": "invalid"}
            details = [
                str(e.get("message") or e.get("code")) if isinstance(e, dict) else str(e) for e in errors
            ]
    else:
        message = " ".join(response.text[:200].split())
    text = f"GitHub {method} {path}: {response.status_code} {message or response.reason_phrase}"
    if details:
        text += f" ({'; '.join(details)})"
    if github_retries.rate_limited(response):
        text += "; rate limited"
    elif "authorization" not in response.request.headers:
        pass  # a signed storage URL: the token played no part
    elif response.status_code in (401, 403):
        text += (
            "; the token in GITHUB_TOKEN lacks the permission: the workflow needs "
            "`permissions: issues: write, pull-requests: write`"
        )
    elif response.status_code == 404:
        text += "; no such repository or issue, or the token cannot see it"
    return text


def _issue(item: Mapping[str, Any]) -> TrackedIssue:
    labels = frozenset(lab if isinstance(lab, str) else lab["name"] for lab in item.get("labels", []))
    return TrackedIssue(item["number"], item["title"], item.get("body") or "", item["state"], labels)


def _pull(item: Mapping[str, Any]) -> PullRequest:
    return PullRequest(
        item["number"], item["html_url"], item["head"]["ref"], item["title"], item.get("body") or ""
    )


class DirectoryRepository:
    """Issues as `issues/<n>.json` (comments inside) and pull requests as `pulls/<n>.json` under `root`.

    Issue and pull request numbers come from one sequence, as on GitHub. Every file is written whole to a
    temporary file and renamed over the old one, so a crash never leaves half a file. One writer at a time.
    """

    def __init__(self, root: Path) -> None:
        self.root = root  # its folders are made by the first write: a command refused before writes nothing

    def list_issues(self, label: str) -> list[TrackedIssue]:
        issues = [_issue(d) for d in self._all("issues") if label in d["labels"]]
        return sorted(issues, key=lambda i: i.number)

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> TrackedIssue:
        document = {"number": self._next_number(), "title": title, "body": body, "state": "open"}
        document |= {"state_reason": None, "labels": sorted(set(labels)), "comments": []}
        self._write("issues", document)
        return _issue(document)

    def update_issue(
        self,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
        state_reason: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> TrackedIssue:
        document = self._read("issues", number)
        if state is not None and state not in _STATES:
            raise GitHubError(f"issue #{number}: state {state!r} is not one of {_STATES}")
        if state_reason is not None and state_reason not in _STATE_REASONS:
            raise GitHubError(
                f"issue #{number}: state_reason {state_reason!r} is not one of {_STATE_REASONS}"
            )
        if state is not None and state != document["state"] and state_reason is None:
            state_reason = "reopened" if state == "open" else "completed"  # GitHub's defaults
        changes = {"title": title, "body": body, "state": state, "state_reason": state_reason}
        document.update({k: v for k, v in changes.items() if v is not None})
        if labels is not None:
            document["labels"] = sorted(set(labels))
        self._write("issues", document)
        return _issue(document)

    def add_comment(self, number: int, body: str) -> None:
        document = self._read("issues", number)
        document["comments"].append({"body": body})
        self._write("issues", document)

    def find_pull_request(self, head_branch: str) -> PullRequest | None:
        pulls = [d for d in self._all("pulls") if d["head"] == head_branch and d["state"] == "open"]
        return self._pull(min(pulls, key=lambda d: d["number"])) if pulls else None

    def create_pull_request(self, head_branch: str, base_branch: str, title: str, body: str) -> PullRequest:
        if self.find_pull_request(head_branch) is not None:
            # What GitHub answers with 422: one open pull request per head and base.
            raise GitHubError(f"a pull request from {head_branch} is already open in {self.root}")
        number = self._next_number()
        document = {"number": number, "head": head_branch, "base": base_branch, "title": title, "body": body}
        self._write("pulls", {**document, "state": "open"})
        return self._pull(document)

    def update_pull_request(self, number: int, title: str, body: str) -> PullRequest:
        document = self._read("pulls", number)
        document.update(title=title, body=body)
        self._write("pulls", document)
        return self._pull(document)

    def _pull(self, document: Mapping[str, Any]) -> PullRequest:
        url = (self.root / "pulls" / f"{document['number']}.json").resolve().as_uri()
        return PullRequest(document["number"], url, document["head"], document["title"], document["body"])

    def _all(self, folder: str) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in (self.root / folder).glob("[0-9]*.json")]

    def _read(self, folder: str, number: int) -> dict[str, Any]:
        path = self.root / folder / f"{number}.json"
        if not path.is_file():
            kind = "issue" if folder == "issues" else "pull request"
            raise GitHubError(f"{kind} #{number}: not found in {self.root}")
        document: dict[str, Any] = json.loads(path.read_text())
        return document

    def _next_number(self) -> int:
        numbers = [
            int(p.stem) for folder in ("issues", "pulls") for p in (self.root / folder).glob("[0-9]*.json")
        ]
        return max(numbers, default=0) + 1

    def _write(self, folder: str, document: Mapping[str, Any]) -> None:
        target = self.root / folder / f"{document['number']}.json"
        text = json.dumps(document, indent=2, sort_keys=True) + "\n"  # fails, if at all, before any file
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, suffix=".tmp", delete=False) as handle:
            handle.write(text)
        os.replace(handle.name, target)
