"""The nightly's subcommands as plain functions (nightly/cli.py parses, these act; tests call them too).

jaxbench nightly plan --flavors cpu,jax --benchmarks "llama2:7b" --bench-runners '{...}' [--github-output F]
jaxbench nightly alerts --repo owner/name | --github-dir DIR [--dashboard-url URL] [--dry-run]
jaxbench nightly store-pull --repo owner/name --out store/results.sqlite
jaxbench nightly land --manifest F --date D --result build=success ... --repo owner/name | --github-dir DIR
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from jaxbench.containers.manifest import load_manifest
from jaxbench.core.ci import github_job_url
from jaxbench.core.dates import parse_date
from jaxbench.core.errors import ExitCode, ExternalFailure, InvalidInput
from jaxbench.harness import recipes
from jaxbench.harness.backends import refusal
from jaxbench.harness.catalog import backend_views
from jaxbench.harness.recipes import recipe_size_choices
from jaxbench.nightly.alert_sync import print_alerts, sync_alerts
from jaxbench.nightly.github import repository_from, rest_repository
from jaxbench.nightly.land import land_manifest, parse_results
from jaxbench.nightly.matrix import BackendPlan, NightlyInputs, plan_nightly

if TYPE_CHECKING:
    from jaxbench.triage.commands import TriageOptions


def _backends() -> dict[str, BackendPlan]:
    """Each backend's image flavor and the recipes (by file) whose family it trains."""
    return {view.name: BackendPlan(view.flavor, view.recipes) for view in backend_views()}


def benchmark_refusal(recipe: str, size: str, backend: str) -> str | None:
    """Why `backend` cannot train `recipe` at `size` as the nightly runs it (the size's own settings, on a
    GPU), from the settings its registry entry refuses."""
    return refusal(backend, recipes.load(recipe, size, default_to_tiny=False).resolved())


def nightly_plan(
    inputs: NightlyInputs, github_output: Path | None, console: Console, date: str | None = None
) -> int:
    """The nightly's matrices as GitHub outputs; `date` (YYYY-MM-DD) names another night than today's."""
    now = dt.datetime.now(dt.UTC)
    if date is not None:
        now = dt.datetime.combine(parse_date(date, "--date"), dt.time(), dt.UTC)
    plan = plan_nightly(
        inputs,
        flavors=list(load_manifest().flavors),
        recipes=recipe_size_choices(),
        now=now,
        backends=_backends(),
        refused=benchmark_refusal,
    )
    lines = [f"{key}={value}" for key, value in plan.outputs().items()]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if github_output is not None:
        with github_output.open("a") as handle:
            handle.write("\n".join(lines) + "\n")
    return ExitCode.OK


def nightly_alerts(
    repo: str | None,
    github_dir: Path | None,
    dashboard_url: str | None,
    dry_run: bool,
    console: Console,
    environ: Mapping[str, str] = os.environ,
) -> int:
    """Judge the store, then bring the tracker's issues in line with its incidents."""
    from jaxbench.results import store
    from jaxbench.results.judgement.detect import detect
    from jaxbench.results.report.build import build_report

    repository = repository_from(repo, github_dir, environ)  # bad target: fail before judging anything
    engine = store.connect()
    report = build_report(detect(engine), engine.url.render_as_string(hide_password=True))
    # An empty URL is what the workflow passes when Pages did not deploy tonight.
    actions = sync_alerts(report, repository, dashboard_url=dashboard_url or None, dry_run=dry_run)
    print_alerts(actions, console, dry_run=dry_run)
    return ExitCode.OK


def nightly_triage(
    repo: str | None,
    github_dir: Path | None,
    options: TriageOptions,
    max_incidents: int,
    console: Console,
    environ: Mapping[str, str] = os.environ,
) -> int:
    """After the alerts: triage the new throughput and correctness incidents, each outcome a comment on the
    incident's issue. Exit 0 whatever the triages found: the incidents are filed either way."""
    from jaxbench.nightly.triage import hand_off
    from jaxbench.results import store

    repository = repository_from(repo, github_dir, environ) if repo or github_dir else None
    hand_off(store.connect(), repository, options, console, max_incidents=max_incidents)
    return ExitCode.OK


SQLITE_HEADER = b"SQLite format 3\x00"


def store_from_zip(data: bytes, where: str) -> bytes:
    """The one SQLite file in an artifact's zip."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            files = [info for info in archive.infolist() if not info.is_dir()]
            if len(files) != 1:
                raise ExternalFailure(f"{where}: expected one file in the artifact, found {len(files)}")
            content = archive.read(files[0])
    except zipfile.BadZipFile as error:
        raise ExternalFailure(f"{where}: not a zip archive ({error})") from None
    if not content.startswith(SQLITE_HEADER):
        raise ExternalFailure(f"{where}: {files[0].filename} is not an SQLite database")
    return content


def nightly_store_pull(
    repo: str,
    out: Path,
    artifact: str,
    branch: str,
    console: Console,
    environ: Mapping[str, str] = os.environ,
) -> int:
    """The store the last nightly left as an artifact, when there is no team store (JAXBENCH_DB secret)."""
    if out.exists():
        raise InvalidInput(f"--out {out}: exists already; not overwriting a store")
    github = rest_repository(repo, environ)
    artifact_id = github.latest_artifact(artifact, branch)
    if artifact_id is None:
        console.print(f"no {artifact} artifact from {branch} yet: tonight starts a new store", markup=False)
        return ExitCode.OK
    content = store_from_zip(github.download_artifact(artifact_id), f"artifact {artifact} ({artifact_id})")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_bytes(content)
    partial.replace(out)
    console.print(
        f"{out}: the store of artifact {artifact} ({artifact_id}), {len(content):,} bytes", markup=False
    )
    return ExitCode.OK


@dataclasses.dataclass(frozen=True)
class LandOptions:
    manifest: Path
    """The bumped manifest (the bump job's artifact)."""
    date: str
    """The nightly's date, YYYY-MM-DD."""
    results: tuple[str, ...]
    """JOB=RESULT of every job that gates the bump, e.g. build=success."""
    checkout: Path = Path(".")
    """A clone of the repository."""
    remote: str = "origin"
    """Where main lives (a remote name or URL)."""
    base: str = "main"
    repo: str | None = None
    """owner/name on GitHub, for the pull request when the bump cannot land (token from GITHUB_TOKEN)."""
    github_dir: Path | None = None
    """A folder standing in for GitHub (make nightly-local)."""


def nightly_land(options: LandOptions, console: Console, environ: Mapping[str, str] = os.environ) -> int:
    if not options.manifest.is_file():
        raise InvalidInput(f"--manifest {options.manifest}: no such file (the bump job's artifact)")
    parse_date(options.date, "--date")
    job_results = parse_results(list(options.results))
    github = (
        repository_from(options.repo, options.github_dir, environ)
        if (options.repo or options.github_dir)
        else None
    )
    landed = land_manifest(
        options.manifest,
        checkout=options.checkout,
        remote=options.remote,
        base=options.base,
        date=options.date,
        job_results=job_results,
        github=github,
        run_url=github_job_url(environ),
    )
    where = f" {landed.pull_request.url}" if landed.pull_request else ""
    console.print(f"{landed.where}: {landed.detail}{where}", markup=False, soft_wrap=True)
    return ExitCode.OK
