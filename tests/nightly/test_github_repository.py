"""The GitHub adapters: RestRepository against an in-memory emulation of the few REST endpoints it calls
(httpx.MockTransport: the exact requests, pagination, errors), DirectoryRepository on a temporary folder,
and one scenario both must pass alike.

    JAX_PLATFORMS=cpu python -m pytest -q tests/nightly/test_github_repository.py
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.nightly.github import (
    DirectoryRepository,
    GitHubError,
    GitHubRepository,
    PullRequest,
    RestRepository,
    repository_from,
)
from jaxbench.nightly.github_retries import RETRIES
from jaxbench.results.alert_plan import TrackedIssue

API = "https://api.github.test"
REPO = "jax-ml/jaxbench"
TOKEN = "ghs_test"


@dataclasses.dataclass
class FakeGitHub:
    """Issues, comments and pull requests in memory behind the REST paths RestRepository uses. Lists come
    `page_size` items a page (whatever per_page asks), linked by Link headers as GitHub does."""

    page_size: int = 2
    issues: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    comments: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    requests: list[httpx.Request] = dataclasses.field(default_factory=list)
    fail: tuple[int, dict[str, Any]] | None = None

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handle))

    def sent(self) -> list[tuple[str, str, Any]]:
        """(method, path and query, JSON body or None) of every request."""
        return [
            (r.method, r.url.raw_path.decode(), json.loads(r.content) if r.content else None)
            for r in self.requests
        ]

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.fail is not None:
            return httpx.Response(self.fail[0], json=self.fail[1])
        body = json.loads(request.content) if request.content else {}
        route = f"{request.method} {request.url.path.removeprefix(f'/repos/{REPO}')}"
        if match := re.fullmatch(r"(GET|POST) /issues", route):
            return self._list_issues(request) if match[1] == "GET" else self._create("issue", body)
        if match := re.fullmatch(r"PATCH /issues/(\d+)", route):
            self.issues[int(match[1])].update(body)
            return httpx.Response(200, json=self._issue(int(match[1])))
        if match := re.fullmatch(r"POST /issues/(\d+)/comments", route):
            self.comments.setdefault(int(match[1]), []).append(body["body"])
            return httpx.Response(201, json={"id": 1, "body": body["body"]})
        if route == "GET /pulls":
            owner, _, branch = request.url.params["head"].partition(":")
            found = [
                p for p in self.pulls.values() if p["head"]["ref"] == branch and owner == REPO.split("/")[0]
            ]
            return httpx.Response(200, json=[p for p in found if p["state"] == request.url.params["state"]])
        if route == "POST /pulls":
            return self._create("pull", body)
        if match := re.fullmatch(r"PATCH /pulls/(\d+)", route):
            self.pulls[int(match[1])].update(body)
            return httpx.Response(200, json=self.pulls[int(match[1])])
        return httpx.Response(404, json={"message": "Not Found"})

    def _issue(self, number: int) -> dict[str, Any]:
        issue = self.issues[number]
        return {**issue, "labels": [{"id": 1, "name": name} for name in issue["labels"]]}

    def _create(self, kind: str, body: dict[str, Any]) -> httpx.Response:
        number = len(self.issues) + len(self.pulls) + 1
        if kind == "issue":
            self.issues[number] = {"number": number, "state": "open", "labels": [], **body}
            return httpx.Response(201, json=self._issue(number))
        html_url = f"https://github.test/{REPO}/pull/{number}"
        self.pulls[number] = {
            "number": number, "state": "open", "html_url": html_url, "title": body["title"],
            "body": body["body"], "head": {"ref": body["head"]}, "base": {"ref": body["base"]},
        }  # fmt: skip
        # A pull request is an issue too, and shows up in the issues list.
        self.issues[number] = {"number": number, "state": "open", "labels": [], "title": body["title"],
                               "body": body["body"], "pull_request": {"url": html_url}}  # fmt: skip
        return httpx.Response(201, json=self.pulls[number])

    def _list_issues(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        assert params["state"] == "all"
        found = [self._issue(n) for n in sorted(self.issues) if params["labels"] in self.issues[n]["labels"]]
        page = int(params.get("page", "1"))
        last = max(1, -(-len(found) // self.page_size))
        headers = {}
        if page < last:
            following = request.url.copy_merge_params({"page": str(page + 1)})
            headers["Link"] = (
                f'<{following}>; rel="next", <{request.url.copy_merge_params({"page": last})}>; rel="last"'
            )
        chunk = found[(page - 1) * self.page_size : page * self.page_size]
        return httpx.Response(200, json=chunk, headers=headers)


@pytest.fixture
def fake() -> FakeGitHub:
    return FakeGitHub()


@pytest.fixture
def rest(fake: FakeGitHub) -> RestRepository:
    return RestRepository(REPO, TOKEN, api_url=API, client=fake.client())


# REST -------------------------------------------------------------------------------------------------------


def test_list_follows_every_page_and_leaves_out_pull_requests(fake: FakeGitHub, rest: RestRepository) -> None:
    for n in range(1, 6):
        fake.issues[n] = {"number": n, "title": f"t{n}", "body": None, "state": "open", "labels": ["x"]}
    fake.issues[6] = {
        "number": 6,
        "title": "pr",
        "body": "",
        "state": "open",
        "labels": ["x"],
        "pull_request": {},
    }
    fake.issues[7] = {"number": 7, "title": "other", "body": "", "state": "closed", "labels": ["y"]}
    issues = rest.list_issues("x")
    assert [i.number for i in issues] == [1, 2, 3, 4, 5]
    assert issues[0] == TrackedIssue(1, "t1", "", "open", frozenset({"x"}))
    pages = [r.url.params.get("page") for r in fake.requests]
    assert pages == [None, "2", "3"]
    assert dict(fake.requests[0].url.params) == {"labels": "x", "state": "all", "per_page": "100"}
    headers = fake.requests[0].headers
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert headers["Accept"] == "application/vnd.github+json"
    assert headers["X-GitHub-Api-Version"] == "2022-11-28"


def test_issue_calls_send_exactly_this_json(fake: FakeGitHub, rest: RestRepository) -> None:
    created = rest.create_issue("Regression", "body", ["jaxbench-regression"])
    assert created == TrackedIssue(1, "Regression", "body", "open", frozenset({"jaxbench-regression"}))
    rest.update_issue(1, body="new")
    closed = rest.update_issue(1, state="closed", state_reason="not_planned", labels=["a", "b"])
    rest.add_comment(1, "Recovered.")
    assert closed.state == "closed" and closed.labels == {"a", "b"}
    assert fake.sent() == [
        ("POST", f"/repos/{REPO}/issues",
         {"title": "Regression", "body": "body", "labels": ["jaxbench-regression"]}),
        ("PATCH", f"/repos/{REPO}/issues/1", {"body": "new"}),
        ("PATCH", f"/repos/{REPO}/issues/1",
         {"state": "closed", "state_reason": "not_planned", "labels": ["a", "b"]}),
        ("POST", f"/repos/{REPO}/issues/1/comments", {"body": "Recovered."}),
    ]  # fmt: skip


def test_pull_request_calls(fake: FakeGitHub, rest: RestRepository) -> None:
    assert rest.find_pull_request("nightly/manifest") is None
    created = rest.create_pull_request("nightly/manifest", "main", "Bump", "why")
    assert created == PullRequest(1, f"https://github.test/{REPO}/pull/1", "nightly/manifest", "Bump", "why")
    assert rest.find_pull_request("nightly/manifest") == created
    assert rest.update_pull_request(1, "Bump 2", "why 2").title == "Bump 2"
    assert fake.sent()[:2] == [
        ("GET", f"/repos/{REPO}/pulls?state=open&head=jax-ml%3Anightly%2Fmanifest&per_page=100", None),
        (
            "POST",
            f"/repos/{REPO}/pulls",
            {"title": "Bump", "head": "nightly/manifest", "base": "main", "body": "why"},
        ),
    ]
    assert fake.sent()[-1] == ("PATCH", f"/repos/{REPO}/pulls/1", {"title": "Bump 2", "body": "why 2"})


def test_forbidden_names_the_call_and_the_missing_permission(fake: FakeGitHub, rest: RestRepository) -> None:
    fake.fail = (403, {"message": "Resource not accessible by integration"})
    with pytest.raises(GitHubError) as caught:
        rest.add_comment(12, "x")
    message = str(caught.value)
    assert message.startswith(f"GitHub POST /repos/{REPO}/issues/12/comments: 403 Resource not accessible")
    assert "issues: write" in message and "pull-requests: write" in message
    assert isinstance(caught.value, ExternalFailure)  # the CLI's clean one-line error and exit 6
    assert TOKEN not in message


def test_validation_errors_carry_githubs_details(fake: FakeGitHub, rest: RestRepository) -> None:
    fake.fail = (422, {"message": "Validation Failed", "errors": [{"resource": "Issue", "code": "invalid"}]})
    with pytest.raises(
        GitHubError, match=r"PATCH /repos/jax-ml/jaxbench/issues/3: 422 Validation Failed \(invalid\)"
    ):
        rest.update_issue(3, state="shut")


def test_network_failure_is_a_clear_error() -> None:
    """After the retries (tests/nightly/test_github_retries.py), one line naming the call and the count."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    no_sleep = dataclasses.replace(RETRIES, sleep=lambda s: None, notify=lambda line: None)
    rest = RestRepository(
        REPO, TOKEN, api_url=API, client=httpx.Client(transport=httpx.MockTransport(refuse)), retries=no_sleep
    )
    with pytest.raises(
        GitHubError,
        match=r"^GitHub GET /repos/jax-ml/jaxbench/issues: ConnectError: connection refused \(5 attempts\)$",
    ):
        rest.list_issues("x")


def test_next_page_on_another_host_is_not_followed(fake: FakeGitHub) -> None:
    def elsewhere(request: httpx.Request) -> httpx.Response:
        fake.requests.append(request)
        return httpx.Response(200, json=[], headers={"Link": '<https://evil.test/steal?page=2>; rel="next"'})

    rest = RestRepository(
        REPO, TOKEN, api_url=API, client=httpx.Client(transport=httpx.MockTransport(elsewhere))
    )
    with pytest.raises(GitHubError, match="is not under"):
        rest.list_issues("x")
    assert len(fake.requests) == 1


@pytest.mark.parametrize("repo", ["jaxbench", "a/b/c", "-x/y", "x/y z", "x/"])
def test_repository_name_is_checked(repo: str) -> None:
    with pytest.raises(InvalidInput, match="expected owner/name"):
        RestRepository(repo, TOKEN)


def test_repository_from_chooses_one(tmp_path: Path) -> None:
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": "https://ghe.test/api/v3"}
    directory = repository_from(None, tmp_path / "gh", {})
    assert isinstance(directory, DirectoryRepository)
    assert not (tmp_path / "gh").exists(), "its folders are made by its first write, not by choosing it"
    directory.create_issue("t", "b", ["l"])
    assert (tmp_path / "gh" / "issues").is_dir()
    rest = repository_from(REPO, None, env)
    assert isinstance(rest, RestRepository) and rest._api == "https://ghe.test/api/v3"
    for repo, directory in [(None, None), (REPO, tmp_path)]:
        with pytest.raises(InvalidInput, match="either --repo"):
            repository_from(repo, directory, env)
    with pytest.raises(InvalidInput, match="GITHUB_TOKEN is not set"):
        repository_from(REPO, None, {})


# Directory --------------------------------------------------------------------------------------------------


def test_directory_survives_a_new_instance_and_writes_whole_files(tmp_path: Path) -> None:
    first = DirectoryRepository(tmp_path)
    first.create_issue("one", "b1", ["x"])
    first.create_pull_request("nightly/manifest", "main", "Bump", "why")
    first.add_comment(1, "hello")
    again = DirectoryRepository(tmp_path)
    assert again.create_issue("three", "b3", ["x", "x"]).number == 3  # one sequence with pull requests
    assert [i.title for i in again.list_issues("x")] == ["one", "three"]
    pull = again.find_pull_request("nightly/manifest")
    assert pull is not None and pull.number == 2 and pull.url.startswith("file://")
    assert json.loads((tmp_path / "issues" / "1.json").read_text())["comments"] == [{"body": "hello"}]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["1.json", "2.json", "3.json"]
    closed = again.update_issue(1, state="closed")
    assert json.loads((tmp_path / "issues" / "1.json").read_text())["state_reason"] == "completed"
    assert closed.state == "closed" and again.update_issue(1, state="open").state == "open"
    assert json.loads((tmp_path / "issues" / "1.json").read_text())["state_reason"] == "reopened"


def test_directory_refuses_what_github_refuses(tmp_path: Path) -> None:
    github = DirectoryRepository(tmp_path)
    github.create_issue("one", "b", [])
    with pytest.raises(GitHubError, match="state 'shut'"):
        github.update_issue(1, state="shut")
    with pytest.raises(GitHubError, match="issue #7: not found"):
        github.add_comment(7, "x")
    github.create_pull_request("b", "main", "t", "")
    with pytest.raises(GitHubError, match="already open"):
        github.create_pull_request("b", "main", "t", "")


# Both alike -------------------------------------------------------------------------------------------------


@pytest.fixture(params=["rest", "directory"])
def repository(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[GitHubRepository, Any]]:
    """The repository and a function returning issue n's comments from its backing store."""
    if request.param == "rest":
        fake = FakeGitHub(page_size=1)
        yield (
            RestRepository(REPO, TOKEN, api_url=API, client=fake.client()),
            lambda n: fake.comments.get(n, []),
        )
    else:

        def comments(n: int) -> list[str]:
            document = json.loads((tmp_path / "issues" / f"{n}.json").read_text())
            return [c["body"] for c in document["comments"]]

        yield DirectoryRepository(tmp_path), comments


def test_issue_and_pull_request_cycle(repository: tuple[GitHubRepository, Any]) -> None:
    github, comments = repository
    assert github.list_issues("jaxbench-regression") == []
    a = github.create_issue("A", "body A", ["jaxbench-regression"])
    github.create_issue("B", "body B", ["other"])
    c = github.create_issue("C", "body C", ["jaxbench-regression", "extra"])
    assert (a.number, c.number) == (1, 3)
    pull = github.create_pull_request("nightly/manifest", "main", "Bump", "why")
    assert pull.number == 4 and pull.head_branch == "nightly/manifest"
    assert github.find_pull_request("nightly/manifest") == pull
    assert github.find_pull_request("elsewhere") is None
    assert github.update_pull_request(4, "Bump 2", "why 2") == dataclasses.replace(
        pull, title="Bump 2", body="why 2"
    )
    updated = github.update_issue(
        1,
        title="A2",
        state="closed",
        state_reason="completed",
        labels=["jaxbench-regression", "jaxbench-recovered"],
    )
    assert updated == TrackedIssue(
        1, "A2", "body A", "closed", frozenset({"jaxbench-regression", "jaxbench-recovered"})
    )
    github.add_comment(1, "Recovered.")
    github.add_comment(1, "Again.")
    assert comments(1) == ["Recovered.", "Again."]
    assert github.list_issues("jaxbench-regression") == [updated, c]
