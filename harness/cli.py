"""The `jaxbench` command: argument parsing -> typed options -> plain functions (which tests call directly).

    jaxbench recipes | flops | run          (the harness, in workflow order)
    jaxbench ingest | detect | report | compare | detect-series | verdict     (the results store)

Exit codes: 0 success; 1 invalid input (nothing was run or written); 3 the run failed (compile error, OOM,
NaN — a result was written); 4 `detect` found an open regression incident; 130 interrupted (a result was
written).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from harness import recipes
from harness.config import InvalidInput
from harness.flops import FLOPS_CONVENTION
from harness.result import Status

if TYPE_CHECKING:
    from harness.runner import RunOptions

EXIT_OK = 0
EXIT_INVALID_INPUT = 1
EXIT_RUN_FAILED = 3
EXIT_REGRESSION = 4
EXIT_INTERRUPTED = 130


def _count(value: float) -> str:
    return f"{value / 1e9:.2f} B" if value >= 1e9 else f"{value / 1e6:.1f} M"


def list_recipes(console: Console) -> int:
    table = Table(title=f"recipes in {recipes.recipes_dir()}")
    for column in ("family", "size", "params", "train FLOPs", "seq/image", "batch", ""):
        table.add_column(column, justify="left" if column in ("family", "size", "") else "right")
    for path in recipes.available_recipes():
        source = recipes.load_recipe_file(path)
        for size in source.sizes:
            recipe = recipes.resolve(source, size, path=path)
            model = recipe.model
            shape = getattr(model, "seq_len", None) or f"{getattr(model, 'image_size', '?')} px"
            table.add_row(
                path.stem,
                size,
                _count(model.param_count()),
                f"{model.training_flops_per_unit():.3g}/{model.unit}",
                str(shape),
                str(recipe.train.global_batch),
                "default" if size == source.default_size else "",
            )
    console.print(table)
    return EXIT_OK


def show_flops(name: str, size: str | None, seq_len: int | None, as_json: bool, console: Console) -> int:
    recipe = recipes.load(name, size, default_to_tiny=False)
    if seq_len is not None and seq_len <= 0:
        raise recipes.RecipeError(f"--seq {seq_len}: expected a positive sequence length")
    try:
        model = recipe.model if seq_len is None else recipe.model.with_sequence_length(seq_len)
    except ValueError as error:
        raise recipes.RecipeError(f"--seq: {error}") from error

    report = {
        "recipe": recipe.name,
        "parameters": model.param_count(),
        "unit": model.unit,
        "training_flops_per_unit": model.training_flops_per_unit(),
        "sequence_length": getattr(model, "seq_len", None),
        "convention": FLOPS_CONVENTION,
    }
    if as_json:
        console.print_json(json.dumps(report))
    else:
        console.print(f"{recipe.name}: {report['parameters']:,} parameters")
        console.print(f"training FLOPs per {model.unit}: {report['training_flops_per_unit']:.6e}")
        if report["sequence_length"]:
            console.print(f"sequence length: {report['sequence_length']}")
        console.print(f"convention: {FLOPS_CONVENTION}")
    return EXIT_OK


def run_recipe(options: RunOptions, ingest: bool, console: Console) -> int:
    # Imported here so that `jaxbench recipes` and `flops` answer without initialising a backend.
    from harness.console import RichReporter
    from harness.runner import execute

    outcome, path = execute(options, RichReporter())
    if ingest and path is not None:
        ingest_own_result(path, console)
    if outcome.status is Status.OK:
        return EXIT_OK
    return EXIT_INTERRUPTED if outcome.status is Status.INTERRUPTED else EXIT_RUN_FAILED


def ingest_own_result(path: Path, console: Console) -> None:
    """A run lands in the configured store; if the store is unreachable the result file still exists."""
    from results import commands, store

    url = store.database_url()
    try:
        summary = commands.ingest(store.connect(url), [path])
    except Exception as error:  # the run is done and written: never lose it over the store
        console.print(
            f"warning: result not ingested into {store.display_url(url)}: {error}\n"
            f"         ingest it later with: jaxbench ingest {path}",
            style="yellow",
            markup=False,
            soft_wrap=True,
        )
        return
    if summary.added:
        console.print(f"ingested into {store.display_url(url)} (run {summary.added[0][1]})", markup=False)


def ingest_files(paths: list[Path], night: str | None, ci_job_url: str | None, console: Console) -> int:
    from results import commands, store

    when = _parse_night(night)
    engine = store.connect()
    summary = commands.ingest(engine, paths, night=when, ci_job_url=ci_job_url)
    for path, run_id in summary.added:
        console.print(f"ingested {path} (run {run_id})", markup=False)
    for path in summary.skipped:
        console.print(f"already in the store: {path}", markup=False)
    return EXIT_OK


def _parse_night(night: str | None) -> dt.date | None:
    if night is None:
        return None
    try:
        return dt.date.fromisoformat(night)
    except ValueError:
        raise InvalidInput(f"--night {night}: expected a date, YYYY-MM-DD") from None


def detect_regressions(console: Console) -> int:
    from results import commands, store

    detection = commands.run_detection(store.connect())
    open_incidents = detection.open_incidents
    for incident in open_incidents:
        series = len(incident.details.get("series", []))
        console.print(
            f"open {incident.kind} incident {incident.id}: {incident.hardware}, "
            f"first bad night {incident.night}, {series} series",
            markup=False,
            soft_wrap=True,
        )
    console.print(
        f"{len(detection.analyses)} series judged; {len(open_incidents)} open incidents", markup=False
    )
    return EXIT_REGRESSION if open_incidents else EXIT_OK


def show_report(fmt: str, out: Path | None, badges: Path | None, console: Console) -> int:
    from results import commands, store

    commands.report(store.connect(), fmt, console, out=out, badges=badges)
    return EXIT_OK


def compare_runs(a: str, b: str, console: Console) -> int:
    from results import commands, store

    files = all(Path(x).suffix == ".json" for x in (a, b))
    rows = commands.compare(None if files else store.connect(), a, b)
    commands.print_comparison(rows, console)
    return EXIT_OK


def detect_series(path: Path, console: Console) -> int:
    from results import commands

    console.print(commands.detect_series(path), markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK


def record_verdict(
    incident: int, decision: str, author: str | None, note: str | None, console: Console
) -> int:
    from results import commands, store

    fingerprint = commands.verdict(store.connect(), incident, decision, author, note)
    console.print(f"incident {incident} ({fingerprint[:12]}): {decision}", markup=False)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxbench", description="Benchmark JAX recipe models.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="train a recipe for a few steps and report standardized numbers")
    run.add_argument("recipe", help="recipe name (llama2, gpt3, vit) or path to a recipe YAML file")
    run.add_argument(
        "--size", help="named size; default: tiny without a GPU, the recipe's default_size with one"
    )
    run.add_argument("--steps", type=int, help="total steps, warmup included (same as --set train.steps=N)")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override any recipe field, validated like the file (repeatable)",
    )
    run.add_argument(
        "--out", type=Path, default=Path("runs"), help="directory for the result JSON (default: runs)"
    )
    run.add_argument(
        "--no-ingest", action="store_true", help="do not add the result to the store (JAXBENCH_DB)"
    )

    commands.add_parser("recipes", help="list recipe families and sizes")

    flops = commands.add_parser(
        "flops", help="parameter count and training FLOPs per token (per image for ViT)"
    )
    flops.add_argument("recipe")
    flops.add_argument("--size", help="named size (default: the recipe's default_size)")
    flops.add_argument("--seq", type=int, help="sequence length to count attention for (language models)")
    flops.add_argument("--json", action="store_true", help="print JSON")

    ingest = commands.add_parser(
        "ingest", help="add result files (jaxbench or pytest-benchmark JSON) to the store"
    )
    ingest.add_argument("files", nargs="+", type=Path)
    ingest.add_argument(
        "--night", help="the night these runs belong to, YYYY-MM-DD (default: from each file)"
    )
    ingest.add_argument("--ci-job-url", help="link to the CI job that produced the files")

    commands.add_parser("detect", help="judge every series; exit 4 while a regression incident is open")

    report = commands.add_parser("report", help="series states and incidents: table, markdown, json or html")
    report.add_argument("--format", default="table", choices=["table", "markdown", "json", "html"])
    report.add_argument("--out", type=Path, help="folder for the HTML dashboard (with --format html)")
    report.add_argument("--badges", type=Path, help="also write shields.io endpoint badges to this folder")

    compare = commands.add_parser(
        "compare", help="two runs (result files or store run ids), metric by metric"
    )
    compare.add_argument("a")
    compare.add_argument("b")

    series = commands.add_parser(
        "detect-series", help="change points of one series in a CSV (a value column)"
    )
    series.add_argument("csv", type=Path)

    verdict = commands.add_parser("verdict", help="record a person's judgement of an incident")
    verdict.add_argument("incident", type=int)
    verdict.add_argument("decision", choices=["real", "infrastructure", "noise", "expected"])
    verdict.add_argument("--author")
    verdict.add_argument("--note")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Piped into a file or a CI log there is no terminal width to fit: rich would assume 80 columns and
    # squeeze the tables.
    console = Console() if sys.stdout.isatty() else Console(width=120)
    errors = Console(stderr=True)
    try:
        return dispatch(args, console)
    except InvalidInput as error:
        errors.print(f"error: {error}", style="bold red", markup=False, highlight=False, soft_wrap=True)
        return EXIT_INVALID_INPUT


def dispatch(args: argparse.Namespace, console: Console) -> int:
    if args.command == "recipes":
        return list_recipes(console)
    if args.command == "flops":
        return show_flops(args.recipe, args.size, args.seq, args.json, console)
    if args.command == "ingest":
        return ingest_files(args.files, args.night, args.ci_job_url, console)
    if args.command == "detect":
        return detect_regressions(console)
    if args.command == "report":
        return show_report(args.format, args.out, args.badges, console)
    if args.command == "compare":
        return compare_runs(args.a, args.b, console)
    if args.command == "detect-series":
        return detect_series(args.csv, console)
    if args.command == "verdict":
        return record_verdict(args.incident, args.decision, args.author, args.note, console)
    from harness.runner import RunOptions

    if args.steps is not None and args.steps <= 0:
        raise recipes.RecipeError(f"--steps {args.steps}: expected a positive number of steps")
    options = RunOptions(args.recipe, args.size, args.steps, tuple(args.overrides), args.out)
    return run_recipe(options, not args.no_ingest, console)


if __name__ == "__main__":
    sys.exit(main())
