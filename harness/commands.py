"""The harness's subcommands as plain functions: the CLI parses arguments and calls these (tests too).

jaxbench recipes | flops | run | flags show|check|diff | ab | microbench     (the harness)
jaxbench ingest | detect | report | compare | detect-series | verdict    (the store, via results.commands)
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from core.dates import parse_date
from core.errors import InvalidInput
from harness import ab, environment, flagcheck, flags, recipes
from harness.flops import FLOPS_CONVENTION
from harness.result import RunResult, Status

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


MICROBENCH_SUITE = Path(__file__).resolve().parent.parent / "benchmarks" / "micro"


def microbench(
    sizes: str | None,
    keyword: str | None,
    out: Path,
    ingest: bool,
    console: Console,
    suite: Path | None = None,
) -> int:
    """Run the pytest-benchmark suites in a fresh process (XLA reads its flags once, at start) and ingest
    the JSON; a benchmark that fails its reference check or crashes is recorded as a failed result."""
    suite = suite or MICROBENCH_SUITE
    if not (suite / "conftest.py").is_file():
        raise InvalidInput(f"{suite}: no microbenchmark suites here (jaxbench runs them from its checkout)")
    if importlib.util.find_spec("pytest_benchmark") is None:
        raise InvalidInput(
            "pytest-benchmark is not installed: pip install -e '.[test]' (make microbench does)"
        )
    out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    report = out / f"microbench-{stamp}.json"
    argv = [sys.executable, "-m", "pytest", str(suite), "-p", "no:cacheprovider", "-p", "no:xdist", "-q"]
    argv += [f"--benchmark-json={report}", "--benchmark-columns=median,iqr,rounds"]
    argv += ["--rootdir", str(suite.parent.parent)]
    argv += ["--sizes", sizes] if sizes else []
    argv += ["-k", keyword] if keyword else []
    # pytest-benchmark times nothing under pytest-xdist, and recognises it by these variables, which a run
    # started from inside an xdist worker (our own tests) would otherwise inherit.
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    code = subprocess.run(argv, env=environ, check=False).returncode
    if not report.is_file():
        console.print(f"error: the suites wrote no results (pytest exit code {code})", style="red")
        return EXIT_RUN_FAILED
    console.print(f"results: {report}", markup=False)
    if ingest:
        ingest_own_result(report, console)
    return EXIT_OK if code == 0 else EXIT_RUN_FAILED


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


def result_files(paths: list[Path], allow_empty: bool) -> list[Path]:
    """Files as given; a folder stands for the JSON files under it. With `allow_empty`, a missing or empty
    folder is nothing to ingest (the nightly's judge job on a night without benchmark jobs)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.rglob("*.json"))
        elif not (allow_empty and not path.exists()):
            files.append(path)
    if not files and not allow_empty:
        raise InvalidInput(f"{' '.join(map(str, paths))}: no result files (*.json)")
    return files


def ingest_files(
    paths: list[Path], night: str | None, ci_job_url: str | None, console: Console, allow_empty: bool = False
) -> int:
    from results import commands, store

    when = _parse_night(night)
    paths = result_files(paths, allow_empty)
    if not paths:
        console.print("no result files: nothing to ingest", markup=False)
        return EXIT_OK
    engine = store.connect()
    summary = commands.ingest(engine, paths, night=when, ci_job_url=ci_job_url)
    for path, run_id in summary.added:
        console.print(f"ingested {path} (run {run_id})", markup=False)
    for path in summary.skipped:
        console.print(f"already in the store: {path}", markup=False)
    return EXIT_OK


def _parse_night(night: str | None) -> dt.date | None:
    return None if night is None else parse_date(night, f"--night {night}")


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


def _flag_set_for(spec: str | None) -> flags.FlagSet:
    """A profile name (or auto, or nothing: auto) resolved on this machine, or a literal flag string."""
    if spec and spec.strip().startswith("--"):
        return flags.FlagSet("(given flags)", flags.parse_flag_string(spec, "the given flags"), {})
    hint = environment.device_hint(os.environ)
    name = spec or flags.AUTO
    if name == flags.AUTO:
        name = flags.auto_profile(hint.platform, hint.device_kind)
    return flags.resolve_profile(name)


def flags_show(spec: str | None, console: Console) -> int:
    flag_set = _flag_set_for(spec)
    hint = environment.device_hint(os.environ)
    console.print(
        f"profile {flag_set.profile} (this machine: {hint.platform}, {hint.device_kind})", markup=False
    )
    for title, table_rows in (("XLA flags", flag_set.xla), ("environment", flag_set.env)):
        table = Table(title=title, title_justify="left")
        for column in ("name", "value", "from", "why", "source"):
            table.add_column(column, overflow="fold")
        for name, setting in sorted(table_rows.items()):
            table.add_row(name, setting.value, setting.origin, setting.reason or "", setting.source or "")
        console.print(table)
    console.print(f"XLA_FLAGS={flag_set.xla_flags()}", markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK


def flags_check(spec: str | None, console: Console) -> int:
    """Check a profile or a flag string (default: your XLA_FLAGS) against the installed jaxlib."""
    flag_set = _flag_set_for(spec if spec is not None else os.environ.get("XLA_FLAGS", "") or None)
    values = {name: s.value for name, s in flag_set.xla.items()}
    origins = {name: s.origin for name, s in flag_set.xla.items()}
    flagcheck.check_or_drop(values, origins, flags.load_renames(), drop=False)
    console.print(f"all {len(values)} flags are known to jaxlib {flagcheck.jaxlib_version()}", markup=False)
    return EXIT_OK


def flags_diff(a: str, b: str, console: Console) -> int:
    rows = flags.diff(_flag_set_for(a), _flag_set_for(b))
    table = Table(title=f"{a} -> {b}", title_justify="left")
    for column in ("flag or variable", a, b):
        table.add_column(column, overflow="fold")
    for name, left, right in rows:
        table.add_row(name, "-" if left is None else left, "-" if right is None else right)
    console.print(table if rows else "no differences", markup=False)
    return EXIT_OK


def ab_compare(
    recipe: str, a: str, b: str, repeats: int, run_args: list[str], out: Path, console: Console
) -> int:
    arms = ab.parse_arm("A", a), ab.parse_arm("B", b)
    for arm in arms:  # a stale flag should fail now, not after half the runs
        flagcheck.check_or_drop(arm.added, {}, flags.load_renames(), drop=False)

    console.print(
        f"A = {a}, B = {b}: {repeats} pairs of `jaxbench run {recipe}`, alternating, each a fresh process; "
        f"results in {out}",
        markup=False,
    )

    def progress(arm: str, index: int, run: RunResult) -> None:
        per_s = run.throughput.per_s if run.throughput else float("nan")
        console.print(
            f"run {index + 1} {arm}: {per_s:,.1f} {run.throughput.unit if run.throughput else ''}s/s"
        )

    outcome = ab.run_ab(recipe, *arms, repeats=repeats, run_args=run_args, out_dir=out, on_run=progress)
    estimate = outcome.estimate
    console.print(
        f"throughput B/A = {estimate.ratio:.4f}, {estimate.confidence:.0%} interval "
        f"[{estimate.low:.4f}, {estimate.high:.4f}] over {estimate.pairs} pairs: {outcome.verdict.value}",
        markup=False,
    )
    return EXIT_OK
