"""Carrying the SQLite store from one nightly to the next as an artifact (no team store configured): the
newest unexpired artifact of a run on main, downloaded through GitHub's redirect without the token.

    JAX_PLATFORMS=cpu python -m pytest -q tests/nightly/test_nightly_store_pull.py
"""

from __future__ import annotations

import io
import sqlite3
import zipfile
from pathlib import Path

import httpx
import pytest

from jaxbench.core.errors import ExternalFailure
from jaxbench.nightly.commands import store_from_zip
from jaxbench.nightly.github import GitHubError, RestRepository

API = "https://api.github.test"
BLOB = "https://blobs.example.test/store.zip?sig=abc"


def sqlite_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "made.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("create table runs (id integer)")
    return path.read_bytes()


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def artifact(number: int, created: str, branch: str, expired: bool = False) -> dict[str, object]:
    return {"id": number, "created_at": created, "expired": expired, "workflow_run": {"head_branch": branch}}


def github(artifacts: list[dict[str, object]], archive: bytes, seen: list[httpx.Request]) -> RestRepository:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/repos/o/r/actions/artifacts":
            assert request.url.params["name"] == "results-store"
            return httpx.Response(200, json={"total_count": len(artifacts), "artifacts": artifacts})
        if request.url.path.startswith("/repos/o/r/actions/artifacts/") and request.url.path.endswith("/zip"):
            return httpx.Response(302, headers={"location": BLOB})
        if str(request.url) == BLOB:
            return httpx.Response(200, content=archive)
        return httpx.Response(404, json={"message": "Not Found"})

    return RestRepository(
        "o/r", "secret-token", api_url=API, client=httpx.Client(transport=httpx.MockTransport(handle))
    )


def test_newest_unexpired_artifact_of_main_is_chosen(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []
    repo = github(
        [
            artifact(1, "2026-11-20T03:00:00Z", "main"),
            artifact(2, "2026-11-21T03:00:00Z", "main"),
            artifact(3, "2026-11-22T03:00:00Z", "main", expired=True),
            artifact(4, "2026-11-23T03:00:00Z", "my-trial-branch"),
        ],
        b"",
        seen,
    )
    assert repo.latest_artifact("results-store", "main") == 2
    assert repo.latest_artifact("results-store", "nope") is None


def test_download_follows_the_redirect_without_the_token(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []
    store = sqlite_bytes(tmp_path)
    repo = github([artifact(7, "2026-11-21T03:00:00Z", "main")], zipped({"results.sqlite": store}), seen)
    data = repo.download_artifact(7)
    assert store_from_zip(data, "artifact") == store
    api_call, blob_call = seen
    assert api_call.headers["authorization"] == "Bearer secret-token"
    assert "authorization" not in blob_call.headers  # the storage URL is signed; the token stays home


def test_a_failed_download_is_named(tmp_path: Path) -> None:
    repo = github([], b"", [])
    with pytest.raises(GitHubError, match=r"GitHub GET .*/actions/artifacts/9/zip"):
        RestRepository(
            "o/r",
            "t",
            api_url=API,
            client=httpx.Client(
                transport=httpx.MockTransport(lambda r: httpx.Response(410, json={"message": "Gone"}))
            ),
        ).download_artifact(9)
    assert repo.latest_artifact("results-store", "main") is None


@pytest.mark.parametrize(
    ("archive", "message"),
    [
        (b"not a zip", "not a zip archive"),
        (zipped({}), "expected one file in the artifact, found 0"),
        (zipped({"a.sqlite": b"x", "b.sqlite": b"y"}), "expected one file in the artifact, found 2"),
        (zipped({"results.sqlite": b"<html>oops</html>"}), "results.sqlite is not an SQLite database"),
    ],
)
def test_bad_artifacts_are_refused(archive: bytes, message: str) -> None:
    with pytest.raises(ExternalFailure, match=message):
        store_from_zip(archive, "artifact results-store (1)")
