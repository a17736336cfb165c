"""The nightly's own steps for the `jaxbench` command, each a job of .github/workflows/nightly.yaml and each a
subcommand of `jaxbench nightly`.

Reading the plan's inputs needs the recipe files and the manifest, never a backend: `jaxbench nightly plan`
imports neither jax nor flax.

    jaxbench nightly plan --flavors cpu --arches amd64 --bench-flavor cpu --owner me
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from jaxbench.core.cli import Subcommand, positive_number
from jaxbench.triage.cli import add_bounds, add_tracker_target, triage_options


def _add_plan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--flavors", default="", help="default: every flavor of the manifest")
    parser.add_argument("--arches", default="", help="default: amd64,arm64")
    parser.add_argument("--benchmarks", default="", help="'recipe[:size] ...' (default: each default size)")
    parser.add_argument(
        "--bench-flavor", default="", help="the image native benchmarks run in (default: jax)"
    )
    parser.add_argument(
        "--backends",
        default="",
        help="'native maxtext levanter pax' (default: native and each framework whose flavor is built)",
    )
    parser.add_argument("--build-runners", default="", help="JSON: arch -> runs-on labels")
    parser.add_argument("--bench-runners", default="", help="JSON: hardware class -> runs-on labels")
    parser.add_argument("--owner", default="", help="GitHub owner: images go to ghcr.io/<owner>")
    parser.add_argument("--publish", default="true", choices=["true", "false"])
    parser.add_argument("--github-output", type=Path, help="also append the outputs to this file")
    parser.add_argument(
        "--date", help="the night, YYYY-MM-DD (default: today, UTC): replays and local nights"
    )


def _plan(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.nightly import commands
    from jaxbench.nightly.matrix import NightlyInputs

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


def _add_alerts(parser: argparse.ArgumentParser) -> None:
    add_tracker_target(parser)
    parser.add_argument("--dashboard-url", help="where the dashboard is served (issues link to it)")
    parser.add_argument("--dry-run", action="store_true", help="print the actions, change nothing")


def _alerts(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.nightly import commands

    return commands.nightly_alerts(args.repo, args.github_dir, args.dashboard_url, args.dry_run, console)


def _add_triage(parser: argparse.ArgumentParser) -> None:
    add_tracker_target(parser)
    parser.add_argument(
        "--incidents", type=positive_number, default=2, help="most incidents taken up a night (default 2)"
    )
    parser.add_argument(
        "--work", type=Path, help="where each incident's triage works (default runs/triage-<fingerprint>)"
    )
    add_bounds(parser)


def _triage(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.nightly import commands

    options = triage_options(args, work=args.work)
    return commands.nightly_triage(args.repo, args.github_dir, options, args.incidents, console)


def _add_store_pull(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", required=True, help="owner/name on GitHub (token from GITHUB_TOKEN)")
    parser.add_argument("--out", type=Path, required=True, help="where the store goes (must not exist)")
    parser.add_argument("--artifact", default="results-store")
    parser.add_argument("--branch", default="main", help="only artifacts of runs on this branch")


def _store_pull(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.nightly import commands

    return commands.nightly_store_pull(args.repo, args.out, args.artifact, args.branch, console)


def _add_land(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifest", type=Path, required=True, help="the bumped manifest")
    parser.add_argument("--date", required=True, help="the nightly's date, YYYY-MM-DD")
    parser.add_argument(
        "--result", action="append", default=[], metavar="JOB=RESULT", help="a gating job's result"
    )
    parser.add_argument("--checkout", type=Path, default=Path("."), help="a clone of the repository")
    parser.add_argument("--remote", default="origin", help="where main lives (a remote name or URL)")
    parser.add_argument("--base", default="main")
    add_tracker_target(parser)


def _land(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.nightly import commands

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


def subcommands() -> list[Subcommand]:
    """The nightly's steps in the order its jobs run them."""
    steps = (
        Subcommand(
            "plan", "check the nightly's inputs and print its date and job matrices", _add_plan, _plan
        ),
        Subcommand(
            "alerts", "one GitHub issue per regression incident; comment on recovery", _add_alerts, _alerts
        ),
        Subcommand(
            "triage",
            "triage each open throughput or correctness incident no triage has finished",
            _add_triage,
            _triage,
        ),
        Subcommand(
            "store-pull",
            "the SQLite store the last nightly left as an artifact",
            _add_store_pull,
            _store_pull,
        ),
        Subcommand(
            "land", "the bumped manifest to main when the gating jobs passed, else a PR", _add_land, _land
        ),
    )
    return [Subcommand("nightly", "the nightly pipeline's own steps (docs/nightly.md)", subcommands=steps)]
