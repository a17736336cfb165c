"""The `jaxbench triage` subcommand: its arguments, the bounds a triage keeps to (shared with `jaxbench
nightly triage`, which hands incidents over), and the typed options they become.

The issue tracker a triage posts its outcome to lives above this layer (nightly/), so the top floor passes
in how to reach it (jaxbench/wiring.py). Parsing imports neither the store nor the statistics.

    jaxbench triage 12 --github-dir runs/github --max-runs 40
    jaxbench triage 40..52 --cpus 1
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from jaxbench.containers.git import git_repository
from jaxbench.core.cli import Handler, Subcommand, positive_minutes, positive_number
from jaxbench.core.cpus import cpu_list, this_process_cpus
from jaxbench.core.errors import InvalidInput
from jaxbench.triage.settings import BOUNDS, Settings

if TYPE_CHECKING:
    from jaxbench.triage.commands import Post, TriageOptions

PostTo = Callable[[str | None, Path | None], "Post | None"]
"""(--repo, --github-dir) -> how to post on the incident's issue there; None where neither is given."""


def add_tracker_target(parser: argparse.ArgumentParser) -> None:
    """--repo or --github-dir: where the incidents' issues are."""
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--repo", help="owner/name on GitHub (token from GITHUB_TOKEN)")
    target.add_argument(
        "--github-dir", type=Path, help="a folder standing in for GitHub (make nightly-local)"
    )


def add_bounds(parser: argparse.ArgumentParser) -> None:
    """One option per bound of triage.settings.BOUNDS, with its default, and the CPUs the runs go to."""
    parser.add_argument(
        "--cpus",
        help="run every benchmark under taskset -c CPUS (a quiet core gives tighter intervals)",
    )
    defaults = Settings()
    for name, help_text in BOUNDS.items():
        default = getattr(defaults, name)
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=positive_minutes if isinstance(default, float) else positive_number,
            default=default,
            help=f"{help_text} (default {default:g})",
        )


def triage_options(
    args: argparse.Namespace, *, restart: bool = False, work: Path | None = None
) -> TriageOptions:
    """The options of `add_bounds` as the triage's settings and CPUs; a combination the settings refuse, or a
    CPU this process may not use, is invalid input."""
    from jaxbench.triage.commands import TriageOptions

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
    cpus = None if args.cpus is None else cpu_list(args.cpus, this_process_cpus())
    repositories = dict(repository_override(text) for text in getattr(args, "repository", None) or [])
    return TriageOptions(
        settings=settings,
        restart=restart,
        work=work,
        cpus=cpus,
        repositories=repositories,
        index=getattr(args, "index", None),
    )


def repository_override(text: str) -> tuple[str, str]:
    """`--repository NAME=URL_OR_PATH`, checked before anything is cloned (no remote helper)."""
    name, equals, repository = text.partition("=")
    if not (equals and name.strip() and repository.strip()):
        raise InvalidInput(
            f"--repository {text!r}: expected COMPONENT=URL_OR_PATH, e.g. optax=/home/me/optax or "
            "optax=https://github.com/me/optax"
        )
    return name.strip(), git_repository(repository.strip(), f"--repository {name.strip()}")


def _add_triage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "incident",
        help="the incident's id (jaxbench report) or 6+ characters of its fingerprint; or BEFORE..AFTER, two "
        "run ids (jaxbench runs) of one benchmark: the change between them, a slowdown or a speed-up",
    )
    add_tracker_target(parser)
    parser.add_argument(
        "--restart", action="store_true", help="forget an earlier triage of it and start over"
    )
    parser.add_argument(
        "--work",
        type=Path,
        help="overlays, mirrors, runs and the summary (default runs/triage-<fingerprint>)",
    )
    parser.add_argument(
        "--repository",
        action="append",
        metavar="COMPONENT=URL_OR_PATH",
        help="fetch a moved component's commits from here instead of the repository the incident recorded "
        "(a fork, a local checkout holding them); repeatable",
    )
    parser.add_argument(
        "--index",
        help="bisect by published releases from here (a simple-API URL or a folder of wheels) every "
        "component the runs recorded two versions of; compiled ones (jax, jaxlib) always move by release, "
        "from PyPI without this",
    )
    add_bounds(parser)


def _triage(post_to: PostTo) -> Handler:
    def run(args: argparse.Namespace, console: Console) -> int:
        from jaxbench.results import store
        from jaxbench.triage.commands import triage_incident

        post = post_to(args.repo, args.github_dir)
        options = triage_options(args, restart=args.restart, work=args.work)
        return triage_incident(store.connect(), args.incident, options, console, post)

    return run


def subcommands(post_to: PostTo) -> list[Subcommand]:
    return [
        Subcommand(
            "triage",
            "rerun an incident's stacks on this machine and bisect it to the culprit commit",
            _add_triage,
            _triage(post_to),
        )
    ]
