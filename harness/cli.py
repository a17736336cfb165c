"""The `jaxbench` command: argument parsing only; each subcommand calls a plain function in
harness.commands, which tests call directly.

    jaxbench recipes | flops | flags | run | ab | microbench    (the harness, in workflow order)
    jaxbench ingest | detect | report | compare | detect-series | verdict     (the results store)
    jaxbench manifest bump|diff|show|record | build      (the pinned stack and its images: containers/)

Exit codes: 0 success; 1 invalid input (nothing was run or written); 3 the run failed (compile error, OOM,
NaN — a result was written); 4 `detect` found an open regression incident; 130 interrupted (a result was
written).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from core.errors import InvalidInput, JaxbenchError
from harness import commands
from harness.microbench import SIZE_SETS


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", help="recipe name (llama2, gpt3, vit) or path to a recipe YAML file")
    parser.add_argument(
        "--size", help="named size; default: tiny without a GPU, the recipe's default_size with one"
    )
    parser.add_argument(
        "--steps", type=int, help="total steps, warmup included (same as --set train.steps=N)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override any recipe field, validated like the file (repeatable)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("runs"), help="folder for result JSON (default: runs)"
    )


def _harness_commands(commands_: argparse._SubParsersAction) -> None:
    commands_.add_parser("recipes", help="list recipe families and sizes")

    flops = commands_.add_parser(
        "flops", help="parameter count and training FLOPs per token (per image for ViT)"
    )
    flops.add_argument("recipe")
    flops.add_argument("--size", help="named size (default: the recipe's default_size)")
    flops.add_argument("--seq", type=int, help="sequence length to count attention for (language models)")
    flops.add_argument("--json", action="store_true", help="print JSON")

    flag_parser = commands_.add_parser("flags", help="XLA flag profiles: show, check against jaxlib, diff")
    flag_commands = flag_parser.add_subparsers(dest="flags_command", required=True)
    show = flag_commands.add_parser("show", help="a profile as resolved on this machine (default: auto)")
    show.add_argument("profile", nargs="?")
    check = flag_commands.add_parser(
        "check", help="a profile or flags (default: your XLA_FLAGS) against jaxlib"
    )
    check.add_argument("flags", nargs="?")
    diff = flag_commands.add_parser("diff", help="what differs between two profiles or flag strings")
    diff.add_argument("a")
    diff.add_argument("b")

    run = commands_.add_parser("run", help="train a recipe for a few steps and report standardized numbers")
    _add_run_options(run)
    run.add_argument(
        "--no-ingest", action="store_true", help="do not add the result to the store (JAXBENCH_DB)"
    )
    run.add_argument(
        "--image",
        help="run inside this jaxbench image (GPUs passed through); the result comes back to --out",
    )
    run.add_argument(
        "--drop-unknown-flags",
        action="store_true",
        help="run without XLA flags the installed jaxlib does not know (recorded in the result)",
    )

    ab = commands_.add_parser("ab", help="A/B two flag sets: alternating runs, throughput ratio and verdict")
    _add_run_options(ab)
    ab.add_argument("--a", required=True, help="flag profile name, or flags: --a='--xla_foo=1 --xla_bar=2'")
    ab.add_argument("--b", required=True, help="flag profile name, or flags: --b='--xla_foo=1'")
    ab.add_argument("--repeats", type=int, default=3, help="runs per arm (default 3)")


def _microbench_command(commands_: argparse._SubParsersAction) -> None:
    micro = commands_.add_parser(
        "microbench", help="kernel and collective microbenchmarks (pytest-benchmark), ingested into the store"
    )
    micro.add_argument(
        "--sizes", choices=SIZE_SETS, help="tiny (CPU, under a minute) or full; default: full on a GPU"
    )
    micro.add_argument("-k", dest="keyword", help="only benchmarks matching this pytest -k expression")
    micro.add_argument("--out", type=Path, default=Path("runs"), help="folder for the JSON (default: runs)")
    micro.add_argument("--no-ingest", action="store_true", help="do not add the results to the store")


def _store_commands(commands_: argparse._SubParsersAction) -> None:
    ingest = commands_.add_parser(
        "ingest", help="add result files (jaxbench or pytest-benchmark JSON) to the store"
    )
    ingest.add_argument("files", nargs="+", type=Path, help="result files, or folders of them")
    ingest.add_argument(
        "--allow-empty", action="store_true", help="a missing or empty folder is not an error"
    )
    ingest.add_argument(
        "--night", help="the night these runs belong to, YYYY-MM-DD (default: from each file)"
    )
    ingest.add_argument("--ci-job-url", help="link to the CI job that produced the files")

    commands_.add_parser("detect", help="judge every series; exit 4 while a regression incident is open")

    report = commands_.add_parser("report", help="series states and incidents: table, markdown, json or html")
    report.add_argument("--format", default="table", choices=["table", "markdown", "json", "html"])
    report.add_argument("--out", type=Path, help="folder for the HTML dashboard (with --format html)")
    report.add_argument("--badges", type=Path, help="also write shields.io endpoint badges to this folder")

    compare = commands_.add_parser(
        "compare", help="two runs (result files or store run ids), metric by metric"
    )
    compare.add_argument("a")
    compare.add_argument("b")

    series = commands_.add_parser(
        "detect-series", help="change points of one series in a CSV (a value column)"
    )
    series.add_argument("csv", type=Path)

    verdict = commands_.add_parser("verdict", help="record a person's judgement of an incident")
    verdict.add_argument("incident", type=int)
    verdict.add_argument("decision", choices=["real", "infrastructure", "noise", "expected"])
    verdict.add_argument("--author")
    verdict.add_argument("--note")


def _container_commands(commands_: argparse._SubParsersAction) -> None:
    manifest = commands_.add_parser("manifest", help="the pin manifest: bump, diff, show, record")
    manifest_commands = manifest.add_subparsers(dest="manifest_command", required=True)
    bump = manifest_commands.add_parser(
        "bump", help="move each component to its branch head and newest release (git, no token)"
    )
    bump.add_argument("--only", action="append", default=[], metavar="COMPONENT", help="repeatable")
    bump.add_argument("--manifest", type=Path, default=None, help="default: containers/manifest.yaml")
    bump.add_argument("--dry-run", action="store_true", help="print the moves, change nothing")
    bump.add_argument("--out", type=Path, help="write the bumped manifest here instead of in place")
    bump.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="COMPONENT=URL#REF",
        help="track another repository or branch for a component (repeatable; space- or comma-separated)",
    )
    diff = manifest_commands.add_parser(
        "diff", help="per-component commit ranges with compare links (files or git revisions)"
    )
    diff.add_argument("old")
    diff.add_argument("new")
    show = manifest_commands.add_parser("show", help="what a flavor installs, stage by stage")
    show.add_argument("flavor")
    show.add_argument("--install", choices=["source", "wheel"], help="default: the flavor's")
    rec = manifest_commands.add_parser("record", help="write the resolved manifest of an image or virtualenv")
    rec.add_argument("--venv", metavar="FLAVOR", help="record this virtualenv against FLAVOR's wheel pins")
    rec.add_argument("--plan", type=Path, help="(images) the last stage's plan")
    rec.add_argument("--stages", type=Path, help="(images) the stage records")
    rec.add_argument("--image", default="", help="(images) the image reference")
    rec.add_argument("--revision", default="")
    rec.add_argument("--created", default="")
    rec.add_argument("--out", type=Path, help="(images) where the resolved manifest goes")

    build = commands_.add_parser("build", help="build a flavor's images from the manifest (make build)")
    build.add_argument("--flavor", default="cpu")
    build.add_argument("--install", choices=["source", "wheel"], help="default: the flavor's")
    build.add_argument("--registry", default=None, help="default: ghcr.io/jaxbench")
    build.add_argument("--date", help="the image's date tag, YYYY-MM-DD (default: today, UTC)")
    build.add_argument("--base-image", help="overrides the flavor's base image")
    build.add_argument(
        "--ca-cert", action="append", type=Path, default=[], help="extra CA certificate for pip (repeatable)"
    )
    build.add_argument("--pip-index-url")
    build.add_argument("--pip-extra-index-url")
    build.add_argument("--manifest", type=Path, help="default: containers/manifest.yaml")

    push = commands_.add_parser(
        "push", help="push this machine's image of a flavor as <flavor>-<date>-<arch> (make push)"
    )
    publish = commands_.add_parser(
        "publish",
        help="the manifest lists <flavor>-<date> and <flavor> from the per-architecture tags (make publish)",
        description="Make <registry>/jax:<flavor>-<date> the list of the requested architectures' images in "
        "the registry; move <registry>/jax:<flavor> to it only when all of them are there. Exit 0: all "
        "published; 5: some architecture missing (the dated list of the others was pushed, the undated tag "
        "not moved); 3: a docker command failed; 1: invalid input, nothing done.",
    )
    for parser in (push, publish):
        parser.add_argument("--flavor", default="cpu")
        parser.add_argument("--registry", default=None, help="default: ghcr.io/jaxbench")
        parser.add_argument("--date", help="the night's date tag, YYYY-MM-DD (default: today, UTC)")
    publish.add_argument(
        "--arches",
        action="append",
        default=[],
        help="architectures that must all be present to move the undated tag (default amd64,arm64)",
    )


def _nightly_commands(commands_: argparse._SubParsersAction) -> None:
    nightly = commands_.add_parser("nightly", help="the nightly pipeline's own steps (see README)")
    steps = nightly.add_subparsers(dest="nightly_command", required=True)
    plan = steps.add_parser("plan", help="check the nightly's inputs and print its date and job matrices")
    plan.add_argument("--flavors", default="", help="default: every flavor of the manifest")
    plan.add_argument("--arches", default="", help="default: amd64,arm64")
    plan.add_argument("--benchmarks", default="", help="'recipe[:size] ...' (default: each default size)")
    plan.add_argument("--bench-flavor", default="", help="the image the benchmarks run in (default: jax)")
    plan.add_argument("--build-runners", default="", help="JSON: arch -> runs-on labels")
    plan.add_argument("--bench-runners", default="", help="JSON: hardware class -> runs-on labels")
    plan.add_argument("--owner", default="", help="GitHub owner: images go to ghcr.io/<owner>")
    plan.add_argument("--publish", default="true", choices=["true", "false"])
    plan.add_argument("--github-output", type=Path, help="also append the outputs to this file")

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


def _github_target(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--repo", help="owner/name on GitHub (token from GITHUB_TOKEN)")
    target.add_argument(
        "--github-dir", type=Path, help="a folder standing in for GitHub (make nightly-local)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxbench", description="Benchmark JAX recipe models and judge them."
    )
    subcommands = parser.add_subparsers(dest="command", required=True)
    _harness_commands(subcommands)
    _microbench_command(subcommands)
    _store_commands(subcommands)
    _container_commands(subcommands)
    _nightly_commands(subcommands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Piped into a file or a CI log there is no terminal width to fit: rich would assume 80 columns and
    # squeeze the tables.
    console = Console() if sys.stdout.isatty() else Console(width=120)
    errors = Console(stderr=True)
    try:
        return dispatch(args, console)
    except JaxbenchError as error:
        errors.print(f"error: {error}", style="bold red", markup=False, highlight=False, soft_wrap=True)
        return error.exit_code


def _run_args(args: argparse.Namespace) -> list[str]:
    """The recipe options of `ab`, passed on to each `jaxbench run`."""
    out = [
        *(["--size", args.size] if args.size else []),
        *(["--steps", str(args.steps)] if args.steps else []),
    ]
    return out + [item for override in args.overrides for item in ("--set", override)]


def dispatch(args: argparse.Namespace, console: Console) -> int:
    if args.command in ("run", "ab") and args.steps is not None and args.steps <= 0:
        raise InvalidInput(f"--steps {args.steps}: expected a positive number of steps")
    match args.command:
        case "recipes":
            return commands.list_recipes(console)
        case "flops":
            return commands.show_flops(args.recipe, args.size, args.seq, args.json, console)
        case "flags" if args.flags_command == "show":
            return commands.flags_show(args.profile, console)
        case "flags" if args.flags_command == "check":
            return commands.flags_check(args.flags, console)
        case "flags":
            return commands.flags_diff(args.a, args.b, console)
        case "ab":
            return commands.ab_compare(
                args.recipe, args.a, args.b, args.repeats, _run_args(args), args.out, console
            )
        case "microbench":
            return commands.microbench(args.sizes, args.keyword, args.out, not args.no_ingest, console)
        case "ingest":
            return commands.ingest_files(args.files, args.night, args.ci_job_url, console, args.allow_empty)
        case "detect":
            return commands.detect_regressions(console)
        case "report":
            return commands.show_report(args.format, args.out, args.badges, console)
        case "compare":
            return commands.compare_runs(args.a, args.b, console)
        case "detect-series":
            return commands.detect_series(args.csv, console)
        case "verdict":
            return commands.record_verdict(args.incident, args.decision, args.author, args.note, console)
        case "manifest" | "build" | "push" | "publish":
            return _dispatch_containers(args, console)
        case "nightly":
            return _dispatch_nightly(args, console)
    if args.image:
        from containers.commands import run_in_image

        inside = [
            args.recipe,
            *_run_args(args),
            *(["--drop-unknown-flags"] if args.drop_unknown_flags else []),
        ]
        return run_in_image(args.image, inside, args.out, not args.no_ingest, console)
    from harness.runner import RunOptions

    options = RunOptions(
        args.recipe,
        args.size,
        args.steps,
        tuple(args.overrides),
        args.out,
        drop_unknown_flags=args.drop_unknown_flags,
    )
    return commands.run_recipe(options, not args.no_ingest, console)


def _dispatch_containers(args: argparse.Namespace, console: Console) -> int:
    from containers import commands as containers
    from containers.manifest import MANIFEST_PATH
    from containers.publish import ARCHES

    repo_dir = Path(__file__).resolve().parent.parent
    if args.command == "push":
        return containers.push_image(
            args.flavor, args.registry or containers.DEFAULT_REGISTRY, args.date, console
        )
    if args.command == "publish":
        registry, arches = args.registry or containers.DEFAULT_REGISTRY, args.arches or ARCHES
        return containers.publish_images(args.flavor, registry, args.date, arches, console)
    if args.command == "build":
        return containers.build_images(
            args.flavor,
            args.install,
            args.registry or containers.DEFAULT_REGISTRY,
            args.date,
            args.base_image,
            args.ca_cert,
            args.pip_index_url,
            args.pip_extra_index_url,
            repo_dir,
            console,
            manifest_path=args.manifest,
        )
    match args.manifest_command:
        case "bump":
            only = [name for item in args.only for name in item.split(",") if name]
            sources = [text for item in args.source for text in item.replace(",", " ").split()]
            return containers.manifest_bump(
                only, args.manifest or MANIFEST_PATH, args.dry_run, console, sources=sources, out=args.out
            )
        case "diff":
            return containers.manifest_diff_command(args.old, args.new, repo_dir, console)
        case "show":
            return containers.manifest_show(args.flavor, args.install, console)
    if args.venv:
        return containers.manifest_record_venv(args.venv, console)
    if not (args.plan and args.stages and args.out):
        raise InvalidInput("manifest record: give --venv FLAVOR, or --plan, --stages and --out (in an image)")
    return containers.manifest_record_image(
        args.plan, args.stages, args.image, args.revision, args.created, args.out, console
    )


def _dispatch_nightly(args: argparse.Namespace, console: Console) -> int:
    from nightly import commands as nightly
    from nightly.matrix import NightlyInputs

    match args.nightly_command:
        case "plan":
            inputs = NightlyInputs(
                flavors=args.flavors,
                arches=args.arches,
                benchmarks=args.benchmarks,
                bench_flavor=args.bench_flavor,
                build_runners=args.build_runners,
                bench_runners=args.bench_runners,
                registry_owner=args.owner,
                publish=args.publish == "true",
            )
            return nightly.nightly_plan(inputs, args.github_output, console)
        case "store-pull":
            return nightly.nightly_store_pull(args.repo, args.out, args.artifact, args.branch, console)
        case "alerts":
            return nightly.nightly_alerts(
                args.repo, args.github_dir, args.dashboard_url, args.dry_run, console
            )
    return nightly.nightly_land(
        args.manifest,
        args.date,
        args.result,
        args.checkout,
        args.remote,
        args.base,
        args.repo,
        args.github_dir,
        console,
    )


if __name__ == "__main__":
    sys.exit(main())
