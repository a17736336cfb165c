"""Arguments from users and files never reach git as options: `manifest diff`, the bump's remote reads and
the nightly's landing refuse a revision, remote or repository that starts with "-". Real git, in tmp_path.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_git_args.py
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from jaxbench.containers import git
from jaxbench.containers.manifest import MANIFEST_PATH
from jaxbench.core.errors import ExitCode, ExternalFailure, InvalidInput
from jaxbench.main import main
from jaxbench.nightly.land import land_manifest
from tests.support.processes import command_on_path


def new_repository(path: Path) -> Path:
    subprocess.run(["git", "init", "--quiet", str(path)], check=True)
    (path / "containers").mkdir()
    (path / "containers" / "manifest.yaml").write_text(MANIFEST_PATH.read_text())
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    subprocess.run(["git", "-C", str(path), *identity, "commit", "--quiet", "-m", "seed"], check=True)
    return path


def test_manifest_diff_refuses_an_option_for_old_and_writes_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read as an option, `git show --output=<out>:containers/manifest.yaml` writes HEAD's patch into
    # <out>:containers/manifest.yaml, so the folder that file would land in is there.
    target = tmp_path / "out"
    (tmp_path / "out:containers").mkdir()

    exit_code = main(["manifest", "diff", "--", f"--output={target}", "HEAD"])

    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    assert exit_code == ExitCode.INVALID_INPUT
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1
    assert message.startswith(f"error: manifest diff OLD '--output={target}': starts with '-'")
    # A file whose name starts with "-" is still a manifest file: only git is kept from reading options.
    monkeypatch.chdir(tmp_path)
    Path("-old.yaml").write_text(MANIFEST_PATH.read_text())
    assert main(["manifest", "diff", "--", "-old.yaml", "-old.yaml"]) == ExitCode.OK


def test_file_at_refuses_a_revision_that_is_an_option(tmp_path: Path) -> None:
    repository = new_repository(tmp_path / "repository")
    with pytest.raises(InvalidInput, match="revision '--output=x': starts with '-'"):
        git.file_at(repository, "--output=x", "containers/manifest.yaml")
    assert git.file_at(repository, "HEAD", "containers/manifest.yaml") == MANIFEST_PATH.read_text()


def test_a_failing_git_is_named_in_one_line(tmp_path: Path) -> None:
    # git says "does not appear to be a git repository", then "Please make sure ..." on further lines.
    with pytest.raises(ExternalFailure) as raised:
        git.GitRemote().read_file(str(tmp_path / "missing"), "main", "containers/manifest.yaml")
    assert "\n" not in str(raised.value)
    assert ": git fetch failed: fatal: " in str(raised.value)


def test_bump_remote_refuses_a_repository_that_is_an_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `git ls-remote --upload-pack=CMD REPO` runs CMD: here it would create `marker`.
    repository = new_repository(tmp_path / "repository")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="repository '--upload-pack=touch marker': starts with '-'"):
        git.GitRemote().refs("--upload-pack=touch marker", [str(repository)])
    with pytest.raises(InvalidInput, match="repository '--upload-pack=touch marker'"):
        git.GitRemote().read_file("--upload-pack=touch marker", "HEAD", "containers/manifest.yaml")
    assert not (tmp_path / "marker").exists()
    assert "refs/heads/" in "".join(git.GitRemote().refs(str(repository), ["refs/heads/*"]))


@pytest.mark.parametrize(
    ("remote", "base", "refusal"),
    [
        ("--upload-pack=touch marker", "main", "--remote '--upload-pack=touch marker': starts with '-'"),
        ("origin", "--force", "--base '--force': starts with '-'"),
    ],
)
def test_landing_refuses_a_remote_or_base_that_is_an_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote: str, base: str, refusal: str
) -> None:
    checkout = new_repository(tmp_path / "checkout")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match=re.escape(refusal)):
        land_manifest(
            MANIFEST_PATH,
            checkout=checkout,
            remote=remote,
            base=base,
            date="2026-11-22",
            job_results={"build": "success"},
            github=None,
        )
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize(
    "repository",
    [
        "https://github.com/google-deepmind/optax.git",
        "http://localhost:8080/optax",
        "ssh://git@github.com/me/optax.git",
        "git+ssh://git@github.com/me/optax.git",
        "git://example.org/optax",
        "file:///srv/mirrors/optax.git",
        "git@github.com:me/optax.git",
        "/srv/mirrors/optax",
        "./optax",
        "origin",
    ],
)
def test_network_and_file_transports_are_repositories(repository: str) -> None:
    assert git.git_repository(repository, "--source optax: URL") == repository


@pytest.mark.parametrize(
    ("repository", "refusal"),
    [
        ("fd::3", "fd:: asks git for a remote helper"),
        ("ext::sh -c touch% marker", "ext:: asks git for a remote helper"),
        ("testhelper::anything", "testhelper:: asks git for a remote helper"),
        ("testhelper://host/path", "testhelper:// is not a transport"),
        ("ext://x", "ext:// is not a transport"),
    ],
)
def test_remote_helpers_are_refused_before_git_runs(repository: str, refusal: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(refusal)):
        git.git_repository(repository, "--source optax: URL")


def _fake_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git-remote-testhelper` on PATH that leaves a marker when git starts it."""
    marker = tmp_path / "helper-ran"
    command_on_path(tmp_path, monkeypatch, "git-remote-testhelper", f"touch {marker}\nexit 1\n")
    return marker


def test_git_itself_runs_no_remote_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Defence in depth: a call that skipped git_repository still reaches no helper (GIT_ALLOW_PROTOCOL).
    marker = _fake_helper(tmp_path, monkeypatch)
    with pytest.raises(ExternalFailure, match="transport 'testhelper' not allowed"):
        git.run_git(["ls-remote", "--", "testhelper::anything"], "reading refs")
    assert not marker.exists()
    repository = new_repository(tmp_path / "repository")  # a local path (git's file transport) still works
    assert "refs/heads/" in "".join(git.GitRemote().refs(str(repository), ["refs/heads/*"]))


@pytest.mark.parametrize(
    ("command", "refusal"),
    [
        (["pr-check", "--base", "main", "--source", "optax=fd::3#main"], "--source optax: URL 'fd::3'"),
        (["pr-check", "--base", "main", "--source", "optax=ext::true#main"], "ext:: asks git"),
        (["manifest", "bump", "--dry-run", "--source", "optax=fd::3#main"], "--source optax: URL 'fd::3'"),
    ],
)
def test_commands_refuse_a_remote_helper_in_one_line_exit_1(
    command: list[str],
    refusal: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(command) == ExitCode.INVALID_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and refusal in err, err
    assert list(tmp_path.iterdir()) == [], "nothing is made before the refusal"
