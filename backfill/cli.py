"""The `jaxbench backfill` subcommand: its arguments and the typed options they become. Parsing imports
neither the store nor jax.

    jaxbench backfill jax 0.6.0..0.12.0.1 --recipes llama2:tiny --max-minutes 60
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from jaxbench.core.cli import Subcommand, positive_minutes, positive_number
from jaxbench.core.cpus import cpu_list, this_process_cpus

DEFAULT_RECIPES = ("llama2:tiny",)


def _add_backfill(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("component", help="a released component of the manifest (jax, flax, optax, ...)")
    parser.add_argument("range", metavar="FROM..TO", help="the releases to run, both ends included")
    parser.add_argument(
        "--recipes",
        nargs="+",
        default=list(DEFAULT_RECIPES),
        metavar="RECIPE[:SIZE]",
        help=f"what each night runs (default {' '.join(DEFAULT_RECIPES)})",
    )
    parser.add_argument(
        "--index",
        help="where the releases are: a simple-API URL (PEP 691, with upload times) or a folder of wheels "
        "(default PyPI)",
    )
    parser.add_argument(
        "--work", type=Path, help="stacks, runs and the ledger (default runs/backfill-<component>)"
    )
    parser.add_argument("--max-versions", type=positive_number, help="run at most this many nights now")
    parser.add_argument("--max-minutes", type=positive_minutes, help="start no night after this many minutes")
    parser.add_argument("--cpus", help="run every benchmark under taskset -c CPUS")
    parser.add_argument(
        "--repeats",
        type=positive_number,
        default=1,
        help="runs of each recipe a night, all ingested; the night is their median (default 1)",
    )
    parser.add_argument(
        "--retry-gaps", action="store_true", help="run again the nights an earlier call left as gaps"
    )


def _backfill(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.backfill.commands import BackfillOptions, run_backfill
    from jaxbench.containers.package_index import parse_range
    from jaxbench.harness.recipes import benchmarks, recipe_size_choices
    from jaxbench.results import store

    first, last = parse_range(args.range, "FROM..TO")
    options = BackfillOptions(
        component=args.component,
        first=first,
        last=last,
        recipes=tuple(benchmarks(args.recipes, recipe_size_choices(), "--recipes")),
        work=args.work or Path("runs") / f"backfill-{args.component}",
        index=args.index,
        max_versions=args.max_versions,
        max_minutes=args.max_minutes,
        cpus=None if args.cpus is None else cpu_list(args.cpus, this_process_cpus()),
        retry_gaps=args.retry_gaps,
        repeats=int(args.repeats),
    )
    return run_backfill(store.connect(), options, console)


def subcommands() -> list[Subcommand]:
    return [
        Subcommand(
            "backfill",
            "run past releases of a component on their release nights: a history before the first nightly",
            _add_backfill,
            _backfill,
        )
    ]
