"""Landing the nightly's bump: on main only when every gating job passed, else one pull request that later
nights update. Real git (a bare repository standing in for GitHub's main, a clone as the job's checkout)
and the folder that stands in for GitHub's pull requests.

    JAX_PLATFORMS=cpu python -m pytest -q tests/nightly/test_nightly_land.py
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from jaxbench.containers.manifest import MANIFEST_PATH
from jaxbench.core.errors import InvalidInput
from jaxbench.nightly.commands import LandOptions, nightly_land
from jaxbench.nightly.github import DirectoryRepository
from jaxbench.nightly.land import PR_BRANCH, Landed, decide_landing, land_manifest

OPTAX = "https://github.com/google-deepmind/optax"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> tuple[Path, Path]:
    """(bare main, a clone of it): main holds the repository's real manifest."""
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "--quiet", "--initial-branch=main")
    (seed / "containers").mkdir()
    (seed / "containers" / "manifest.yaml").write_text(MANIFEST_PATH.read_text())
    git(seed, "add", ".")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "seed")
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(seed), str(bare)], check=True)
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", str(bare), str(checkout)], check=True)
    return bare, checkout


def bumped(tmp_path: Path, commit: str) -> Path:
    data = yaml.safe_load(MANIFEST_PATH.read_text())
    data["components"]["optax"]["commit"] = commit
    path = tmp_path / f"bumped-{commit[:4]}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def land(
    tmp_path: Path, checkout: Path, commit: str, date: str, results: dict[str, str], **extra: object
) -> Landed:
    """Land a manifest whose optax pin is `commit` on the stand-in main (remote `origin`, base `main`)."""
    return land_manifest(
        bumped(tmp_path, commit),
        checkout=checkout,
        remote="origin",
        base="main",
        date=date,
        job_results=results,
        github=DirectoryRepository(tmp_path / "github"),
        **extra,  # type: ignore[arg-type]
    )


def main_manifest(bare: Path, ref: str = "main") -> dict:  # type: ignore[type-arg]
    return yaml.safe_load(git(bare, "show", f"{ref}:containers/manifest.yaml"))


@pytest.mark.parametrize(
    ("results", "to_main"),
    [
        ({"build": "success", "bench": "success"}, True),
        ({"build": "success", "bench": "none"}, True),  # no GPU runners: nothing to gate on
        ({"build": "success", "bench": "failure"}, False),
        ({"build": "success", "bench": "skipped"}, False),  # skipped: nothing was tested
        ({"build": "cancelled", "bench": "success"}, False),
        ({"bench": "none"}, False),  # nothing ran at all
    ],
)
def test_decide_landing(results: dict[str, str], to_main: bool) -> None:
    landing = decide_landing(results)
    assert landing.to_main is to_main
    for job, result in results.items():
        if result not in ("success", "none"):
            assert f"{job}: {result}" in landing.reason


def test_decide_landing_rejects_unknown_results() -> None:
    with pytest.raises(InvalidInput, match="--result build=green: expected one of success, failure"):
        decide_landing({"build": "green"})
    with pytest.raises(InvalidInput, match="--result: give the result of every job"):
        decide_landing({})


def test_passing_night_lands_on_main(tmp_path: Path, origin: tuple[Path, Path]) -> None:
    bare, checkout = origin
    github = DirectoryRepository(tmp_path / "github")  # the same folder land() writes to
    before = git(bare, "rev-parse", "main")
    landed = land(tmp_path, checkout, "a" * 40, "2026-11-22", {"build": "success", "bench": "success"})
    assert landed.where == "main" and landed.pull_request is None
    assert git(bare, "rev-parse", "main~1") == before
    assert main_manifest(bare)["components"]["optax"]["commit"] == "a" * 40
    message = git(bare, "log", "-1", "--format=%B", "main")
    assert message.startswith("nightly 2026-11-22: manifest bump")
    assert f"{OPTAX}/compare/" in message  # the component range, with its compare link
    assert github.find_pull_request(PR_BRANCH) is None
    # The job's checkout is untouched (the commit is made in a scratch worktree, then removed).
    assert git(checkout, "status", "--porcelain") == "" and git(checkout, "worktree", "list").count("\n") == 0
    again = land(tmp_path, checkout, "a" * 40, "2026-11-23", {"build": "success"})
    assert again.where == "unchanged"


def test_failing_nights_share_one_pull_request(tmp_path: Path, origin: tuple[Path, Path]) -> None:
    bare, checkout = origin
    before = git(bare, "rev-parse", "main")
    first = land(
        tmp_path,
        checkout,
        "b" * 40,
        "2026-11-22",
        {"build": "success", "bench": "failure"},
        run_url="https://github.com/o/r/actions/runs/1",
    )
    assert first.where == "pull-request" and first.pull_request is not None
    assert git(bare, "rev-parse", "main") == before  # main keeps the last stack that worked
    assert main_manifest(bare, PR_BRANCH)["components"]["optax"]["commit"] == "b" * 40
    assert "bench: failure" in first.pull_request.body and "actions/runs/1" in first.pull_request.body
    second = land(tmp_path, checkout, "c" * 40, "2026-11-23", {"build": "failure"})
    assert second.pull_request is not None and second.pull_request.number == first.pull_request.number
    assert "2026-11-23" in second.pull_request.title and "build: failure" in second.pull_request.body
    assert main_manifest(bare, PR_BRANCH)["components"]["optax"]["commit"] == "c" * 40
    assert len(list((tmp_path / "github").rglob("*.json"))) == 1  # one pull request, never a pile


def test_push_to_a_protected_main_falls_back_to_the_pull_request(
    tmp_path: Path, origin: tuple[Path, Path]
) -> None:
    bare, checkout = origin
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(
        '#!/bin/sh\nwhile read old new ref; do [ "$ref" = refs/heads/main ] && exit 1; done\nexit 0\n'
    )
    hook.chmod(0o755)
    landed = land(tmp_path, checkout, "d" * 40, "2026-11-22", {"build": "success"})
    assert landed.where == "pull-request" and "pushing to main failed" in landed.detail
    assert main_manifest(bare, PR_BRANCH)["components"]["optax"]["commit"] == "d" * 40


def test_bad_input_fails_before_any_git_work(tmp_path: Path, origin: tuple[Path, Path]) -> None:
    bare, checkout = origin
    console = Console(file=io.StringIO())
    broken = tmp_path / "broken.yaml"
    broken.write_text("components: {optax: {commit: 1}}\n")

    def land_options(manifest: Path, date: str, result: str, github_dir: Path | None = None) -> LandOptions:
        return LandOptions(manifest, date, (result,), checkout, github_dir=github_dir)

    with pytest.raises(InvalidInput, match="--manifest .*missing.yaml: no such file"):
        nightly_land(land_options(tmp_path / "missing.yaml", "2026-11-22", "build=success"), console)
    with pytest.raises(InvalidInput, match="--date '22/11/2026': expected YYYY-MM-DD"):
        nightly_land(land_options(bumped(tmp_path, "e" * 40), "22/11/2026", "build=success"), console)
    with pytest.raises(InvalidInput, match="--result 'build': expected JOB=RESULT"):
        nightly_land(land_options(bumped(tmp_path, "e" * 40), "2026-11-22", "build"), console)
    with pytest.raises(InvalidInput):
        nightly_land(land_options(broken, "2026-11-22", "build=success", tmp_path / "gh"), console)
    with pytest.raises(InvalidInput, match="no --repo or --github-dir for its pull request"):
        nightly_land(land_options(bumped(tmp_path, "e" * 40), "2026-11-22", "build=failure"), console)
    assert git(bare, "branch", "--list").split() == ["*", "main"]  # nothing pushed anywhere
