"""What the CI system tells a job about itself: the link to the running GitHub Actions job, recorded with
every run the nightly ingests and in the pull requests it opens."""

from __future__ import annotations

from collections.abc import Mapping


def github_job_url(environ: Mapping[str, str]) -> str | None:
    """The link to the running GitHub Actions job, from the variables every job has."""
    parts = [environ.get(n) for n in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}" if all(parts) else None
