"""The nightly's own steps for the `jaxbench` command, each a job of .github/workflows/nightly.yaml.

    jaxbench nightly plan | alerts | store-pull | land

Reading the plan's inputs needs the recipe files and the manifest, never a backend: `jaxbench nightly plan`
imports neither jax nor flax.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from core.cli import Subcommand


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
    return [Subcommand("nightly", "the nightly pipeline's own steps (see README)", _add_nightly, _nightly)]
