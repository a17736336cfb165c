"""Triage on the nightly's side: the outcome goes onto the incident's issue as a comment, and after the
alerts each new throughput or correctness incident goes to `jaxbench triage`, bounded in runs and minutes.

    jaxbench triage INCIDENT [--repo owner/name | --github-dir DIR] [--restart] [--max-runs N] ...
    jaxbench nightly triage [--repo owner/name | --github-dir DIR] [--incidents N] [--work DIR] ...
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console
from sqlalchemy import Engine

from jaxbench.core.errors import InvalidInput, JaxbenchError, one_line
from jaxbench.nightly.github import GitHubRepository
from jaxbench.results import triage_records
from jaxbench.results.alert_plan import LABEL
from jaxbench.results.triage_records import StoredIncident
from jaxbench.triage.commands import TRIAGED_KINDS, Post, TriageOptions, default_work, triage_incident


def commenter(repository: GitHubRepository) -> Post:
    """Posts on the issue the nightly opened for the incident (found by its marker), if there is one."""

    def post(incident: StoredIncident, markdown: str) -> str | None:
        for issue in repository.list_issues(LABEL):
            if issue.fingerprint == incident.fingerprint:
                repository.add_comment(issue.number, markdown)
                return f"issue #{issue.number}"
        return None

    return post


def hand_off(
    engine: Engine,
    repository: GitHubRepository | None,
    options: TriageOptions,
    console: Console,
    *,
    max_incidents: int,
) -> int:
    """Triage the open throughput and correctness incidents that no triage has finished yet, oldest first,
    at most `max_incidents` a night; returns how many it took up. A triage refused before any run (a
    microbenchmark's series, only compiled components moved) takes no slot; one that fails on the way (a
    stack that does not install) takes its slot. Either is reported and the next incident is tried: the
    incident's issue is filed either way, so the alerts job does not fail over it."""
    started = 0
    for incident_id, fingerprint in triage_records.open_incidents(engine, TRIAGED_KINDS):
        if started >= max_incidents:
            console.print(f"triage: incident {incident_id} waits for the next night (--incidents)")
            continue
        done = triage_records.latest_triage(engine, fingerprint)
        if done is not None and done.state not in triage_records.RESUMABLE:
            continue
        # options.work, if given, is the parent of each incident's own work folder.
        work = default_work(fingerprint, options.work or Path("runs"))
        try:
            triage_incident(
                engine,
                str(incident_id),
                dataclasses.replace(options, work=work),
                console,
                None if repository is None else commenter(repository),
            )
        except InvalidInput as refused:
            # Refused before any run (a microbenchmark's series, a component it cannot rerun): it takes
            # none of the night's slots, which go to the incidents that can be triaged.
            console.print(f"triage of incident {incident_id}: {one_line(str(refused))}", markup=False)
            continue
        except JaxbenchError as error:
            console.print(f"triage of incident {incident_id}: {one_line(str(error))}", markup=False)
        started += 1
    if not started:
        console.print("triage: no new throughput or correctness incident")
    return started
