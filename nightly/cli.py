"""The nightly's own steps for the `jaxbench` command, each a job of .github/workflows/nightly.yaml.

    jaxbench nightly plan | alerts | store-pull | land

Reading the plan's inputs needs the recipe files and the manifest, never a backend: `jaxbench nightly plan`
imports neither jax nor flax.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from core.cli import Subcommand, positive_number
from core.errors import InvalidInput

if TYPE_CHECKING:
    from triage.commands import TriageOptions


def _github_target(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--repo", help="owner/name on GitHub (token from GITHUB_TOKEN)")
    target.add_argument(
        "--github-dir", type=Path, help="a folder standing in for GitHub (make nightly-local)"
    )


def _add_nightly(parser: argparse.ArgumentParser) -> None:
    steps = parser.add_subparsers(dest="nightly_command", required=True)
    plan = steps.add_parser("plan", help="check the nightly's inputs and print its date and job matrices")
    plan.add_argument("--flavors", default="", help="default: every flavor of the manifest")
    plan.add_argument("--arches", default="", help="default: amd64,arm64")
    plan.add_argument("--benchmarks", default="", help="'recipe[:size] ...' (default: each default size)")
    plan.add_argument("--bench-flavor", default="", help="the image native benchmarks run in (default: jax)")
    plan.add_argument(
        "--backends",
        default="",
        help="'native maxtext levanter' (default: native and each framework whose flavor is built)",
    )
    plan.add_argument("--build-runners", default="", help="JSON: arch -> runs-on labels")
    plan.add_argument("--bench-runners", default="", help="JSON: hardware class -> runs-on labels")
    plan.add_argument("--owner", default="", help="GitHub owner: images go to ghcr.io/<owner>")
    plan.add_argument("--publish", default="true", choices=["true", "false"])
    plan.add_argument("--github-output", type=Path, help="also append the outputs to this file")
    plan.add_argument("--date", help="the night, YYYY-MM-DD (default: today, UTC): replays and local nights")

    alerts = steps.add_parser("alerts", help="one GitHub issue per regression incident; comment on recovery")
    _github_target(alerts)
    alerts.add_argument("--dashboard-url", help="where the dashboard is served (issues link to it)")
    alerts.add_argument("--dry-run", action="store_true", help="print the actions, change nothing")

    triage = steps.add_parser(
        "triage", help="triage each open throughput or correctness incident no triage has finished"
    )
    _github_target(triage)
    triage.add_argument(
        "--incidents", type=positive_number, default=2, help="most incidents taken up a night (default 2)"
    )
    triage.add_argument(
        "--work", type=Path, help="where each incident's triage works (default runs/triage-<fingerprint>)"
    )
    _triage_bounds(triage)

    pull = steps.add_parser("store-pull", help="the SQLite store the last nightly left as an artifact")
    pull.add_argument("--repo", required=True, help="owner/name on GitHub (token from GITHUB_TOKEN)")
    pull.add_argument("--out", type=Path, required=True, help="where the store goes (must not exist)")
    pull.add_argument("--artifact", default="results-store")
    pull.add_argument("--branch", default="main", help="only artifacts of runs on this branch")

    land = steps.add_parser("land", help="the bumped manifest to main when the gating jobs passed, else a PR")
    land.add_argument("--manifest", type=Path, required=True, help="the bumped manifest")
    land.add_argument("--date", required=True, help="the nightly's date, YYYY-MM-DD")
    land.add_argument(
        "--result", action="append", default=[], metavar="JOB=RESULT", help="a gating job's result"
    )
    land.add_argument("--checkout", type=Path, default=Path("."), help="a clone of the repository")
    land.add_argument("--remote", default="origin", help="where main lives (a remote name or URL)")
    land.add_argument("--base", default="main")
    _github_target(land)


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected minutes, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of minutes, got {text!r}")
    return value


def _triage_bounds(parser: argparse.ArgumentParser) -> None:
    from triage.settings import BOUNDS, Settings

    defaults = Settings()
    for name, help_text in BOUNDS.items():
        default = getattr(defaults, name)
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=_minutes if isinstance(default, float) else positive_number,
            default=default,
            help=f"{help_text} (default {default:g})",
        )


def _triage_options(args: argparse.Namespace, **extra: object) -> TriageOptions:
    from triage.commands import TriageOptions
    from triage.settings import BOUNDS, Settings

    bounds = {name: getattr(args, name) for name in BOUNDS}
    try:
        settings = Settings(
            repeats=int(bounds["repeats"]),
            probe_repeats=int(bounds["probe_repeats"]),
            max_probe_repeats=2 * int(bounds["probe_repeats"]),
            max_probes=int(bounds["max_probes"]),
            max_runs=int(bounds["max_runs"]),
            max_minutes=float(bounds["max_minutes"]),
        )
    except ValueError as error:
        raise InvalidInput(f"triage: {error}") from error
    restart, work = extra.get("restart", False), extra.get("work")
    assert isinstance(restart, bool) and (work is None or isinstance(work, Path))
    return TriageOptions(settings=settings, restart=restart, work=work)


def _add_triage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "incident", help="the incident's id (jaxbench report) or 6+ characters of its fingerprint"
    )
    _github_target(parser)
    parser.add_argument(
        "--restart", action="store_true", help="forget an earlier triage of it and start over"
    )
    parser.add_argument(
        "--work",
        type=Path,
        help="overlays, mirrors, runs and the summary (default runs/triage-<fingerprint>)",
    )
    _triage_bounds(parser)


def _triage(args: argparse.Namespace, console: Console) -> int:
    from nightly.github import repository_from
    from nightly.triage import commenter
    from results import store
    from triage.commands import triage_incident

    repository = None
    if args.repo or args.github_dir:
        repository = repository_from(args.repo, args.github_dir, os.environ)
    options = _triage_options(args, restart=args.restart, work=args.work)
    return triage_incident(
        store.connect(),
        args.incident,
        options,
        console,
        None if repository is None else commenter(repository),
    )


def _nightly(args: argparse.Namespace, console: Console) -> int:
    from nightly import commands
    from nightly.matrix import NightlyInputs

    match args.nightly_command:
        case "plan":
            inputs = NightlyInputs(
                flavors=args.flavors,
                arches=args.arches,
                benchmarks=args.benchmarks,
                bench_flavor=args.bench_flavor,
                backends=args.backends,
                build_runners=args.build_runners,
                bench_runners=args.bench_runners,
                registry_owner=args.owner,
                publish=args.publish == "true",
            )
            return commands.nightly_plan(inputs, args.github_output, console, date=args.date)
        case "alerts":
            return commands.nightly_alerts(
                args.repo, args.github_dir, args.dashboard_url, args.dry_run, console
            )
        case "triage":
            triage_options = _triage_options(args, work=args.work)
            return commands.nightly_triage(
                args.repo, args.github_dir, triage_options, args.incidents, console
            )
        case "store-pull":
            return commands.nightly_store_pull(args.repo, args.out, args.artifact, args.branch, console)
        case "land":
            options = commands.LandOptions(
                manifest=args.manifest,
                date=args.date,
                results=tuple(args.result),
                checkout=args.checkout,
                remote=args.remote,
                base=args.base,
                repo=args.repo,
                github_dir=args.github_dir,
            )
            return commands.nightly_land(options, console)
    raise AssertionError(f"unhandled nightly command {args.nightly_command}")


def subcommands() -> list[Subcommand]:
    return [
        Subcommand("nightly", "the nightly pipeline's own steps (see README)", _add_nightly, _nightly),
        Subcommand(
            "triage",
            "rerun an incident's stacks on this machine and bisect it to the culprit commit",
            _add_triage,
            _triage,
        ),
    ]
