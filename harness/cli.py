"""The `jaxbench` command: argument parsing -> typed options -> plain functions (which tests call directly).

    jaxbench recipes
    jaxbench flops llama2 --size 7b
    jaxbench run llama2 [--size S] [--steps N] [--set key.path=value ...] [--out DIR]

Exit codes: 0 success; 1 invalid input (nothing was run); 3 the run failed (compile error, OOM, NaN — a
result was written); 130 interrupted (a result was written).
"""

from __future__ import annotations

import argparse
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


def run_recipe(options: RunOptions) -> int:
    # Imported here so that `jaxbench recipes` and `flops` answer without initialising a backend.
    from harness.console import RichReporter
    from harness.runner import execute

    outcome, _ = execute(options, RichReporter())
    if outcome.status is Status.OK:
        return EXIT_OK
    return EXIT_INTERRUPTED if outcome.status is Status.INTERRUPTED else EXIT_RUN_FAILED


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

    commands.add_parser("recipes", help="list recipe families and sizes")

    flops = commands.add_parser(
        "flops", help="parameter count and training FLOPs per token (per image for ViT)"
    )
    flops.add_argument("recipe")
    flops.add_argument("--size", help="named size (default: the recipe's default_size)")
    flops.add_argument("--seq", type=int, help="sequence length to count attention for (language models)")
    flops.add_argument("--json", action="store_true", help="print JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console()
    errors = Console(stderr=True)
    try:
        if args.command == "recipes":
            return list_recipes(console)
        if args.command == "flops":
            return show_flops(args.recipe, args.size, args.seq, args.json, console)
        from harness.runner import RunOptions

        if args.steps is not None and args.steps <= 0:
            raise recipes.RecipeError(f"--steps {args.steps}: expected a positive number of steps")
        options = RunOptions(args.recipe, args.size, args.steps, tuple(args.overrides), args.out)
        return run_recipe(options)
    except InvalidInput as error:
        errors.print(f"error: {error}", style="bold red", markup=False, highlight=False, soft_wrap=True)
        return EXIT_INVALID_INPUT


if __name__ == "__main__":
    sys.exit(main())
