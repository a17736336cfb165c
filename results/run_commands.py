"""`jaxbench runs`: take a run out of the judgement without SQL, and see which are out (results/cli.py parses
the arguments; these functions print, and tests call them). The decisions themselves are
results/quarantine.py's.

    jaxbench runs list [--quarantined | --deleted] [--limit N]
    jaxbench runs quarantine 12 13 --note "clock jumped on node-3"
    jaxbench runs release 12
    jaxbench runs delete 14 --note "a test file ingested by mistake" --yes
"""

from __future__ import annotations

import dataclasses
import getpass

from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.core.json_output import print_json
from jaxbench.results import quarantine, store
from jaxbench.results.quarantine import Decision, Recorded


@dataclasses.dataclass(frozen=True)
class DecisionOptions:
    runs: tuple[int, ...]
    """Store run ids (core/ids.py: parse_id)."""
    decision: Decision
    note: str | None = None
    """Why: required to quarantine or delete a run."""
    author: str | None = None
    """Who (default: this user's login name)."""
    confirmed: bool = False
    """--yes: a deletion removes the runs' rows for good."""
    as_json: bool = False
    """Print what was recorded as one JSON document (core/json_output.py)."""


def _author(given: str | None) -> str | None:
    if given:
        return given
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no USER variable and no password entry (a bare container)
        return None


def _check(options: DecisionOptions) -> None:
    """Refuse a decision that would record no reason, or a deletion not confirmed, before the store is
    opened."""
    verb = options.decision.value
    if options.decision is not Decision.RELEASE and not (options.note and options.note.strip()):
        raise InvalidInput(f"runs {verb}: --note WHY is required; the store keeps why a run was taken out")
    if options.decision is Decision.DELETE and not options.confirmed:
        raise InvalidInput(
            "runs delete: removes the runs' results for good; add --yes to confirm, or quarantine them "
            "instead (jaxbench runs quarantine), which keeps their rows"
        )


def decide_on_runs(options: DecisionOptions, console: Console) -> int:
    """Quarantine, release or delete runs of the configured store, all or none."""
    _check(options)
    engine = store.connect()
    author = _author(options.author)
    try:
        if options.decision is Decision.DELETE:
            changed = [
                (run_id, True) for run_id in quarantine.delete(engine, options.runs, author, options.note)
            ]
        else:
            changed = quarantine.decide(engine, options.runs, options.decision, author, options.note)
    except LookupError as error:
        raise InvalidInput(str(error)) from error
    if options.as_json:
        runs = [{"run_id": run_id, "recorded": changes} for run_id, changes in changed]
        shown = {"decision": options.decision, "author": author, "note": options.note, "runs": runs}
        print_json(console, f"runs {options.decision.value}", shown)
        return ExitCode.OK
    done = {Decision.QUARANTINE: "quarantined", Decision.RELEASE: "released", Decision.DELETE: "deleted"}
    state = {Decision.QUARANTINE: "quarantined", Decision.RELEASE: "not quarantined"}
    for run_id, changes in changed:
        line = done[options.decision] if changes else f"already {state[options.decision]}: nothing recorded"
        console.print(f"run {run_id}: {line}", markup=False)
    if any(changes for _, changes in changed) and options.decision is not Decision.DELETE:
        console.print("the next jaxbench detect judges the series without them", markup=False)
    return ExitCode.OK


def _by(recorded: Recorded) -> str:
    who = f" by {recorded.author}" if recorded.author else ""
    why = f": {recorded.note}" if recorded.note else ""
    return f"{recorded.decision.value}d {recorded.created_at:%Y-%m-%d %H:%M}{who}{why}"


def list_runs(quarantined: bool, deleted: bool, limit: int, console: Console, as_json: bool = False) -> int:
    """The newest runs (or only the quarantined ones, or the deletions), newest first."""
    if limit < 1:
        raise InvalidInput(f"--limit {limit}: expected at least 1")
    engine = store.connect()
    if deleted:
        gone = quarantine.deletions(engine, limit)
        if as_json:
            print_json(console, "runs list", {"deleted": gone})
            return ExitCode.OK
        for recorded in gone:
            console.print(
                f"run {recorded.run_id} ({recorded.run_uid or 'no run id'}): {_by(recorded)}", markup=False
            )
        console.print(f"{len(gone)} deleted runs shown", markup=False)
        return ExitCode.OK
    runs = quarantine.listing(engine, quarantined_only=quarantined, limit=limit)
    if as_json:
        print_json(console, "runs list", {"runs": runs})
        return ExitCode.OK
    for run in runs:
        benchmarks = ", ".join(run.benchmarks[:3]) + (", ..." if len(run.benchmarks) > 3 else "")
        out = f"  [{_by(run.quarantine)}]" if run.quarantine else ""
        console.print(
            f"run {run.run_id}: {run.night} {run.schedule} {run.status} on {run.hostname or '-'}: "
            f"{benchmarks or 'no results'}{out}",
            markup=False,
            soft_wrap=True,
        )
    console.print(f"{len(runs)} {'quarantined ' if quarantined else ''}runs shown", markup=False)
    return ExitCode.OK
