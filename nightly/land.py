"""The nightly's last step: the bumped manifest goes to main only when tonight's builds and benchmarks
passed; otherwise it waits in one pull request, so main always holds the last stack that worked.

    jaxbench nightly land --manifest build/nightly/manifest.yaml --date 2026-11-22 \
        --result build=success --result bench=failure --repo owner/name

`decide_landing` is pure. The git side works in a scratch worktree at the remote's tip, so the checkout
it runs in is never touched; the pull request goes through a `GitHubRepository` (the REST API, or a
folder standing in for it in `make nightly-local`).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path

from jaxbench.containers.diff import manifest_diff
from jaxbench.containers.git import file_at, git_argument, git_repository, run_git
from jaxbench.containers.manifest import load_manifest
from jaxbench.core.documents import parse_yaml
from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.core.markdown_escape import escape_markdown, markdown_code
from jaxbench.nightly.github import GitHubRepository, PullRequest
from jaxbench.results.report.github_markdown import link

MANIFEST_IN_REPO = "containers/manifest.yaml"
PR_BRANCH = "nightly/manifest"
"""One branch, force-pushed each night a bump cannot land: one pull request, never a pile of them."""
JOB_RESULTS = ("success", "failure", "cancelled", "skipped", "none")
"""GitHub's job results, and `none`: the job had nothing to do tonight (no GPU runners configured)."""
COMMITTER = ("jaxbench nightly", "41898282+github-actions[bot]@users.noreply.github.com")
"""GitHub's identity for commits made with a workflow's token."""


@dataclasses.dataclass(frozen=True)
class Landing:
    to_main: bool
    reason: str


@dataclasses.dataclass(frozen=True)
class Landed:
    where: str
    """`main`, `unchanged` or `pull-request`."""
    detail: str
    pull_request: PullRequest | None = None


def decide_landing(job_results: Mapping[str, str]) -> Landing:
    """`job_results`: each gating job's `needs.<job>.result`. Anything but success (a skipped benchmark
    included: nothing was tested) keeps the bump off main."""
    if not job_results:
        raise InvalidInput("--result: give the result of every job that gates the bump (e.g. build=success)")
    bad = {job: result for job, result in job_results.items() if result not in JOB_RESULTS}
    if bad:
        given = ", ".join(f"{job}={result}" for job, result in bad.items())
        raise InvalidInput(f"--result {given}: expected one of {', '.join(JOB_RESULTS)}")
    failed = [f"{job}: {result}" for job, result in job_results.items() if result not in ("success", "none")]
    if failed:
        return Landing(False, "not every gating job passed (" + ", ".join(failed) + ")")
    passed = [job for job, result in job_results.items() if result == "success"]
    if not passed:
        return Landing(False, "no gating job ran")
    return Landing(True, "every gating job passed (" + ", ".join(passed) + ")")


def parse_results(items: list[str]) -> dict[str, str]:
    results = {}
    for item in items:
        job, equals, result = item.partition("=")
        if not (equals and job):
            raise InvalidInput(f"--result {item!r}: expected JOB=RESULT, e.g. build=success")
        results[job] = result
    return results


def change_summary(old_text: str, new_text: str) -> list[str]:
    """One Markdown line per component that moved, with its compare link."""
    lines = []
    old, new = parse_yaml(old_text, "the last manifest"), parse_yaml(new_text, "the bumped manifest")
    for change in manifest_diff(old, new):
        old, new = (change.last_good or "unknown")[:12], (change.first_bad or "unknown")[:12]
        compare = _link_in_parentheses("compare", change.compare_url)
        lines.append(
            f"- {escape_markdown(change.name)}: {markdown_code(old)} → {markdown_code(new)}{compare}"
        )
    return lines or ["- (no component commit moved: repository or ref changes only)"]


def _link_in_parentheses(text: str, url: str | None) -> str:
    """ " ([text](url))", or "" without a safe `url`."""
    shown = link(text, url, otherwise="")
    return f" ({shown})" if shown else ""


def _pull_request_body(date: str, landing: Landing, changes: list[str], run_url: str | None) -> str:
    run = _link_in_parentheses("the run", run_url)
    # The reason names the jobs as given on the command line, and git's own words where a push failed.
    reason = escape_markdown(landing.reason)
    return "\n".join(
        [
            f"The nightly of {date} bumped the manifest but it did not land on main: {reason}{run}.",
            "",
            "Merge once the failure is understood (or fixed upstream); the next nightly whose builds and "
            "benchmarks pass lands its own bump and makes this one obsolete. Each nightly that cannot land "
            "replaces this branch with its own bump.",
            "",
            "## Components",
            "",
            *changes,
        ]
    )


def land_manifest(
    manifest: Path,
    *,
    checkout: Path,
    remote: str,
    base: str,
    date: str,
    job_results: Mapping[str, str],
    github: GitHubRepository | None,
    run_url: str | None = None,
) -> Landed:
    """Commit `manifest` as containers/manifest.yaml on top of `remote`'s `base` and push it there, or to
    PR_BRANCH with a pull request. `github` is needed only for the pull request."""
    load_manifest(manifest)  # never land a manifest that does not load
    git_repository(remote, "--remote")
    git_argument(base, "--base")
    landing = decide_landing(job_results)
    if not landing.to_main and github is None:
        raise InvalidInput(
            "the bump cannot land on main and there is no --repo or --github-dir for its pull request"
        )
    new_text = manifest.read_text()
    git = ["-C", str(checkout)]
    run_git([*git, "fetch", "--quiet", "--", remote, f"refs/heads/{base}"], f"fetching {base} from {remote}")
    tip = run_git([*git, "rev-parse", "FETCH_HEAD"], "reading the fetched tip").strip()
    old_text = file_at(checkout, tip, MANIFEST_IN_REPO, f"reading {MANIFEST_IN_REPO} at {base}")
    if old_text == new_text:
        return Landed("unchanged", f"{remote} {base} already holds this manifest")
    changes = change_summary(old_text, new_text)
    identity = ["-c", f"user.name={COMMITTER[0]}", "-c", f"user.email={COMMITTER[1]}"]
    with tempfile.TemporaryDirectory(prefix="jaxbench-land-") as scratch:
        tree = Path(scratch) / "tree"
        run_git(
            [*git, "worktree", "add", "--quiet", "--detach", "--", str(tree), tip],
            "making a scratch worktree",
        )
        try:
            (tree / MANIFEST_IN_REPO).write_text(new_text)
            message = f"nightly {date}: manifest bump\n\n{landing.reason}.\n\n" + "\n".join(changes) + "\n"
            run_git([*identity, "-C", str(tree), "commit", "--quiet", "-am", message], "committing the bump")
            if landing.to_main:
                try:
                    run_git(
                        ["-C", str(tree), "push", "--quiet", "--", remote, f"HEAD:refs/heads/{base}"], "push"
                    )
                    return Landed("main", f"pushed to {remote} {base}: {landing.reason}")
                except ExternalFailure as error:  # main moved meanwhile, or is protected
                    landing = Landing(False, f"{landing.reason}, but pushing to {base} failed: {error}")
                    if github is None:
                        raise
            run_git(
                ["-C", str(tree), "push", "--quiet", "--force", "--", remote, f"HEAD:refs/heads/{PR_BRANCH}"],
                f"pushing {PR_BRANCH}",
            )
        finally:
            run_git([*git, "worktree", "remove", "--force", "--", str(tree)], "removing the scratch worktree")
    assert github is not None
    title = f"Nightly manifest bump of {date} (did not land on {base})"
    body = _pull_request_body(date, landing, changes, run_url)
    existing = github.find_pull_request(PR_BRANCH)
    if existing is None:
        pull = github.create_pull_request(PR_BRANCH, base, title, body)
    else:
        pull = github.update_pull_request(existing.number, title, body)
    return Landed("pull-request", landing.reason, pull)
