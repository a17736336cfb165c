"""The harness's subcommands as plain functions on typed options: harness/cli.py parses arguments and calls
these, and so do the tests.

    jaxbench recipes --json
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from jaxbench.core.errors import ExitCode, InvalidInput, RunFailed
from jaxbench.core.files import writable_folder
from jaxbench.core.json_output import print_json
from jaxbench.core.processes import run_to_its_end
from jaxbench.harness import catalog, recipes
from jaxbench.harness import flags as harness_flags
from jaxbench.harness.backends import backend_entry
from jaxbench.harness.flags import environment
from jaxbench.harness.flags import profiles as flags
from jaxbench.harness.launch import Launcher, ResultSink
from jaxbench.harness.measure.flops import FLOPS_CONVENTION
from jaxbench.harness.provenance import collection as provenance
from jaxbench.harness.run import inputs
from jaxbench.harness.runtime.options import OUT_FLAG, RunOptions, Schedule
from jaxbench.harness.runtime.result import RunResult
from jaxbench.harness.tables import add_plain_row


def _count(value: float) -> str:
    return f"{value / 1e9:.2f} B" if value >= 1e9 else f"{value / 1e6:.1f} M"


def list_recipes(console: Console, as_json: bool = False) -> int:
    """Every size of every recipe file: a table, or JSON (harness/catalog.py: RecipeSize's fields)."""
    rows = catalog.recipe_sizes()
    if as_json:
        print_json(console, "recipes", rows)
        return ExitCode.OK
    table = Table(title=escape(f"recipes in {recipes.recipes_dir()}"))
    for column in ("family", "size", "params", "train FLOPs", "seq/image", "batch", ""):
        table.add_column(column, justify="left" if column in ("family", "size", "") else "right")
    for row in rows:
        add_plain_row(
            table,
            row.recipe,
            row.size,
            _count(row.params),
            f"{row.train_flops_per_unit:.3g}/{row.unit}",
            str(row.seq_len or f"{row.image_size} px"),
            str(row.global_batch),
            "default" if row.default else "",
        )
    console.print(table)
    return ExitCode.OK


def list_backends(console: Console, as_json: bool = False, frameworks_only: bool = False) -> int:
    """The backends and the recipes each trains: a table, JSON (harness/catalog.py: BackendView's fields),
    or with `frameworks_only` the framework backends' names, one a line (what make makes a virtualenv for)."""
    views = catalog.backend_views()
    if frameworks_only:
        for view in views:
            if view.framework:
                console.print(view.name, markup=False, highlight=False)
        return ExitCode.OK
    if as_json:
        print_json(console, "backends", views)
        return ExitCode.OK
    table = Table(title="backends: who trains the recipes (jaxbench run --backend NAME)")
    for column in ("backend", "trains", "environment"):
        table.add_column(column)
    for view in views:
        where = (
            f".venv-{view.name} (make venv FLAVOR={view.flavor}) or the {view.flavor} image"
            if view.framework
            else "this environment (jaxbench's own models)"
        )
        add_plain_row(table, view.name, ", ".join(view.families), where)
    console.print(table)
    return ExitCode.OK


@dataclasses.dataclass(frozen=True)
class FlopsOptions:
    recipe: str
    size: str | None = None
    """Default: the recipe's default_size."""
    seq_len: int | None = None
    """Count attention at this sequence length instead of the recipe's (language models)."""
    as_json: bool = False


def show_flops(options: FlopsOptions, console: Console) -> int:
    recipe = recipes.load(options.recipe, options.size, default_to_tiny=False)
    seq_len = options.seq_len
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
    if options.as_json:
        print_json(console, "flops", report)
    else:
        console.print(f"{recipe.name}: {report['parameters']:,} parameters", markup=False)
        console.print(f"training FLOPs per {model.unit}: {report['training_flops_per_unit']:.6e}")
        if report["sequence_length"]:
            console.print(f"sequence length: {report['sequence_length']}")
        console.print(f"convention: {FLOPS_CONVENTION}")
    return ExitCode.OK


def refuse_overlay_elsewhere(backend: str, image: str | None, environ: Mapping[str, str]) -> None:
    """An overlay (`jaxbench overlay`, make bench OVERLAY=DIR) adds components to this virtualenv through
    the environment: inside an image or a framework's own environment the run would not import them, yet
    record their commits. Refused before anything starts."""
    if not (image or backend_entry(backend).framework) or not environ.get(provenance.MANIFEST_ENV):
        return
    if (provenance.read_image_info(environ).manifest or {}).get("kind") == provenance.OVERLAY_KIND:
        raise InvalidInput(
            f"{provenance.MANIFEST_ENV}={environ[provenance.MANIFEST_ENV]} is an overlay of this virtualenv: "
            f"it runs with --backend native and no --image, got --backend {backend}"
            + (f" --image {image}" if image else "")
        )


def run_recipe(run: RunOptions, launcher: Launcher, sink: ResultSink, console: Console) -> int:
    """Run a recipe where `launcher` says; every result it wrote goes to `sink` (the store, by default).
    Whichever the launcher, the run's inputs are checked first, in a dry run too, before it starts
    anything (harness/run/inputs.py: check_run)."""
    processes = launcher.processes(os.environ)
    inputs.check_run(run, processes.hint, processes.environ)
    launched = launcher.launch(run, console)
    for path in launched.results:
        sink(path, console)
    return launched.exit_code


@dataclasses.dataclass(frozen=True)
class MicrobenchOptions:
    sizes: str | None = None
    """tiny or full (harness/microbench/work.py: SIZE_SETS); default: full on a GPU."""
    keyword: str | None = None
    """Only benchmarks matching this pytest -k expression."""
    out: Path = Path("runs")
    schedule: Schedule = Schedule.AD_HOC
    """Recorded in the JSON (machine_info.jaxbench.schedule): nightly runs are judged, ad-hoc ones only
    reported."""


MICROBENCH_SUITE = Path(__file__).resolve().parent / "microbench" / "suite"


def microbench(
    options: MicrobenchOptions, sink: ResultSink, console: Console, suite: Path = MICROBENCH_SUITE
) -> int:
    """Run the pytest-benchmark suites in a fresh process (XLA reads its flags once, at start) and hand the
    JSON to `sink`; a benchmark that fails its reference check or crashes is recorded as a failed result."""
    if not (suite / "conftest.py").is_file():
        raise InvalidInput(f"{suite}: no microbenchmark suites here (jaxbench runs them from its checkout)")
    if importlib.util.find_spec("pytest_benchmark") is None:
        raise InvalidInput(
            "pytest-benchmark is not installed: pip install -e '.[test]' (make microbench does)"
        )
    writable_folder(options.out, OUT_FLAG)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    report = options.out / f"microbench-{stamp}.json"
    # pytest-benchmark writes its report in place, at the end: readers of the folder (gpu-check) must never
    # take a half-written one for it.
    written = report.with_name(f".{report.name}.partial")
    argv = [sys.executable, "-m", "pytest", str(suite), "-p", "no:cacheprovider", "-p", "no:xdist", "-q"]
    argv += ["-p", "jaxbench.harness.microbench.unfinished"]
    argv += [f"--benchmark-json={written}", "--benchmark-columns=median,iqr,rounds"]
    argv += ["--rootdir", str(suite.parents[2])]
    argv += ["--sizes", options.sizes] if options.sizes else []
    argv += ["-k", options.keyword] if options.keyword else []
    argv += ["--schedule", options.schedule.value]
    # pytest-benchmark times nothing under pytest-xdist, and recognises it by these variables, which a run
    # started from inside an xdist worker (our own tests) would otherwise inherit.
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    interrupted = False
    try:
        code = run_to_its_end(argv, env=environ)
    except KeyboardInterrupt:  # pytest-benchmark still writes the kernels timed so far: they are kept
        interrupted, code = True, int(ExitCode.INTERRUPTED)
    if not written.is_file() or written.stat().st_size == 0:
        written.unlink(missing_ok=True)
        if interrupted:
            raise KeyboardInterrupt
        raise RunFailed(f"the microbenchmark suites wrote no results (pytest exit code {code})")
    os.replace(written, report)
    console.print(
        f"results: {report}" + (" (interrupted: the kernels timed before)" if interrupted else ""),
        markup=False,
    )
    sink(report, console)
    if interrupted:
        return ExitCode.INTERRUPTED
    return ExitCode.OK if code == 0 else ExitCode.FAILED


def flags_show(spec: str | None, console: Console, as_json: bool = False) -> int:
    hint = environment.device_hint(os.environ)  # nvidia-smi, asked once
    flag_set = harness_flags.for_spec(spec, hint)
    if as_json:
        shown = {
            "profile": flag_set.profile,
            "platform": hint.platform,
            "device_kind": hint.device_kind,
            "xla": dict(sorted(flag_set.xla.items())),
            "environment": dict(sorted(flag_set.env.items())),
            "XLA_FLAGS": flag_set.xla_flags(),
        }
        print_json(console, "flags show", shown)
        return ExitCode.OK
    console.print(
        f"profile {flag_set.profile} (this machine: {hint.platform}, {hint.device_kind})", markup=False
    )
    for title, table_rows in (("XLA flags", flag_set.xla), ("environment", flag_set.env)):
        table = Table(title=title, title_justify="left")
        for column in ("name", "value", "from", "why", "source"):
            table.add_column(column, overflow="fold")
        for name, setting in sorted(table_rows.items()):
            add_plain_row(
                table, name, setting.value, setting.origin, setting.reason or "", setting.source or ""
            )
        console.print(table)
    console.print(f"XLA_FLAGS={flag_set.xla_flags()}", markup=False, highlight=False, soft_wrap=True)
    return ExitCode.OK


def flags_check(spec: str | None, console: Console, as_json: bool = False) -> int:
    """Check a profile or a flag string (default: your XLA_FLAGS) against the installed jaxlib."""
    flag_set = harness_flags.for_spec(
        spec if spec is not None else os.environ.get("XLA_FLAGS", "") or None,
        environment.device_hint(os.environ),
    )
    values = {name: s.value for name, s in flag_set.xla.items()}
    version = harness_flags.check_known(values, {name: s.origin for name, s in flag_set.xla.items()})
    if as_json:
        print_json(console, "flags check", {"known_flags": len(values), "jaxlib": version})
    else:
        console.print(f"all {len(values)} flags are known to jaxlib {version}", markup=False)
    return ExitCode.OK


def flags_diff(a: str, b: str, console: Console, as_json: bool = False) -> int:
    hint = environment.device_hint(os.environ)  # nvidia-smi, asked once for both sides
    rows = flags.diff(harness_flags.for_spec(a, hint), harness_flags.for_spec(b, hint))
    if as_json:
        differences = [{"name": name, "a": left, "b": right} for name, left, right in rows]
        print_json(console, "flags diff", {"a": a, "b": b, "differences": differences})
        return ExitCode.OK
    table = Table(title=escape(f"{a} -> {b}"), title_justify="left")
    for column in ("flag or variable", a, b):
        table.add_column(escape(column), overflow="fold")
    for name, left, right in rows:
        add_plain_row(table, name, "-" if left is None else left, "-" if right is None else right)
    console.print(table if rows else "no differences", markup=False)
    return ExitCode.OK


@dataclasses.dataclass(frozen=True)
class ABOptions:
    run: RunOptions
    """The recipe options every run of both arms shares; results go under run.out_dir/A and /B."""
    a: str
    """A flag profile name, or flags such as '--xla_foo=1 --xla_bar=2'."""
    b: str
    repeats: int = 3
    """Runs per arm."""


def ab_compare(options: ABOptions, console: Console) -> int:
    # Here, not at the top: its statistics import numpy, which no other subcommand here needs to start.
    from jaxbench.harness.run import ab

    arms = ab.parse_arm("A", options.a), ab.parse_arm("B", options.b)
    hint = environment.device_hint(os.environ)
    for arm in arms:  # a stale flag or a bad --set should fail now, not after half the runs
        harness_flags.check_known(arm.added)
        overrides = (*options.run.overrides, *ab.arm_overrides(arm))
        inputs.check_run(dataclasses.replace(options.run, overrides=overrides), hint, os.environ)
    recipe, *run_args = options.run.recipe_arguments()
    out = writable_folder(options.run.out_dir, OUT_FLAG)
    console.print(
        f"A = {options.a}, B = {options.b}: {options.repeats} pairs of `jaxbench run {recipe}`, alternating, "
        f"each a fresh process; results in {out}",
        markup=False,
    )

    def progress(arm: str, index: int, run: RunResult) -> None:
        per_s = run.throughput.per_s if run.throughput else float("nan")
        console.print(
            f"run {index + 1} {arm}: {per_s:,.1f} {run.throughput.unit if run.throughput else ''}s/s"
        )

    outcome = ab.run_ab(
        recipe, *arms, repeats=options.repeats, run_args=run_args, out_dir=out, on_run=progress
    )
    estimate = outcome.estimate
    console.print(
        f"throughput B/A = {estimate.ratio:.4f}, {estimate.confidence:.0%} interval "
        f"[{estimate.low:.4f}, {estimate.high:.4f}] over {estimate.pairs} pairs: {outcome.verdict.value}",
        markup=False,
    )
    return ExitCode.OK
