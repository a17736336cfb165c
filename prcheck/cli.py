"""The `jaxbench pr-check` subcommand: parsed arguments to PRCheckOptions (prcheck/options.py), then
prcheck.commands.pr_check."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from jaxbench.core.cli import Subcommand, whole_number

DESCRIPTION = """\
A change against its base before it merges: each benchmark runs on both, base then head in pairs of fresh
processes on this machine, until a paired interval of the step-time ratio head / base settles (or the rounds
run out). Writes OUT/pr-check.md (a table for the pull request) and OUT/pr-check.json; exit 4 when a
benchmark regressed beyond the threshold or the head broke it.

  jaxbench pr-check --base origin/main --head HEAD
  jaxbench pr-check --base v0.2.8 --source optax=https://github.com/me/optax#fix --recipes llama2:tiny
"""


def subcommands() -> list[Subcommand]:
    return [
        Subcommand(
            "pr-check",
            "a change against its base: paired A/B runs and a verdict per benchmark",
            _add_arguments,
            _pr_check,
            DESCRIPTION,
        )
    ]


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from jaxbench.prcheck.options import DEFAULT_BENCHMARKS, PRCheckOptions

    defaults = PRCheckOptions(base="")
    parser.add_argument(
        "--base",
        required=True,
        help="the base: a revision of this repository, or with --source the component's base ref",
    )
    parser.add_argument("--head", help="the head revision of this repository (not with --source)")
    parser.add_argument(
        "--source",
        metavar="COMPONENT=URL#REF",
        help="the change is to this component of the manifest: its head at REF of URL, overlaid on this "
        "checkout's virtualenv (pure-Python components)",
    )
    parser.add_argument(
        "--recipes",
        nargs="+",
        default=list(DEFAULT_BENCHMARKS),
        metavar="RECIPE:SIZE",
        help=f"the benchmarks (default: {' '.join(DEFAULT_BENCHMARKS)})",
    )
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
        help="a recipe setting for every run of both sides (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--repeats", type=whole_number, default=defaults.repeats, help="pairs per round (default %(default)s)"
    )
    parser.add_argument(
        "--max-rounds",
        type=whole_number,
        default=defaults.max_rounds,
        help="rounds at most while a benchmark stays inconclusive (default %(default)s)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=defaults.threshold,
        help="the slowdown worth an alarm, a fraction (default %(default)s)",
    )
    parser.add_argument(
        "--cpus", help="run every benchmark under taskset -c CPUS (a quiet core gives tighter intervals)"
    )
    parser.add_argument(
        "--out", type=Path, default=defaults.out, help="where the verdict goes (default %(default)s)"
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=defaults.work,
        help="stacks, mirrors and every run's result (default %(default)s)",
    )


def _pr_check(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.prcheck.commands import pr_check
    from jaxbench.prcheck.options import PRCheckOptions

    options = PRCheckOptions(
        base=args.base,
        head=args.head,
        source=args.source,
        benchmarks=tuple(args.recipes),
        overrides=tuple(args.overrides),
        repeats=args.repeats,
        max_rounds=args.max_rounds,
        threshold=args.threshold,
        out=args.out,
        work=args.work,
        cpus=args.cpus,
    )
    return pr_check(options, console)
