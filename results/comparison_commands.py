"""Two runs side by side: `jaxbench compare` (metric by metric, with a test of each difference) and
`jaxbench hlo-diff` (their compiled programs), each of two result files or two runs of the store by id.
Apart from the other store commands because the comparison's statistics import scipy, which `report`,
`ingest` and `detect` do not need to start.

    jaxbench compare runs/a.json runs/b.json
    jaxbench hlo-diff 12 13
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.core.json_output import print_json
from jaxbench.core.schema import first_problem
from jaxbench.harness.run.program_diff import ProgramSide, compare_programs
from jaxbench.harness.runtime.result import Program
from jaxbench.harness.tables import add_plain_row
from jaxbench.results import schema, store
from jaxbench.results.compare import MetricComparison, compare_runs
from jaxbench.results.history import load_run_results
from jaxbench.results.ingest import ParsedResult, parse_file
from jaxbench.results.judgement.components import parse_xla_flags


@dataclasses.dataclass(frozen=True)
class _Side:
    results: list[ParsedResult]
    schedule: str
    """"nightly" or "ad-hoc": a comparison takes either, and says which."""

    def describe(self) -> str:
        """What this side ran: its benchmark, who trained it, and whether by hand."""
        if not self.results:
            return "nothing"
        series = self.results[0].series
        return f"{series.benchmark} ({series.backend}, {self.schedule})"


def _side_of(engine: Engine, reference: str) -> _Side:
    if _is_result_file(reference):
        parsed = parse_file(Path(reference))
        return _Side(parsed.results, parsed.schedule)
    if not reference.isdigit():
        raise InvalidInput(f"{reference}: expected a result file or a run id from the store")
    with store.transaction(engine) as session:
        try:
            results = load_run_results(session, int(reference))
        except LookupError as error:
            raise InvalidInput(str(error)) from error
        run = session.get(schema.Run, int(reference))
        return _Side(results, run.schedule if run else "nightly")


def compare(engine: Engine | None, a: str, b: str) -> tuple[list[MetricComparison], tuple[str, str]]:
    """The metric-by-metric comparison, and what each side ran. Two backends (or flag sets, or
    images) of one recipe and size compare; two different recipes do not. Nightly and ad-hoc runs compare
    alike: what each side ran says which it is."""

    def load(reference: str) -> _Side:
        if engine is None and not Path(reference).exists():
            raise InvalidInput(f"{reference}: no such file")
        return _side_of(engine, reference)  # type: ignore[arg-type]

    side_a, side_b = load(a), load(b)
    benchmarks = {r.series.benchmark for r in [*side_a.results, *side_b.results]}
    if len(benchmarks) > 1:
        raise InvalidInput(
            f"compare {a} {b}: A ran {side_a.describe()} and B {side_b.describe()}; compare runs of one "
            "recipe and size (two backends, flag sets or images of it)"
        )
    rows = compare_runs(side_a.results, side_b.results)
    return rows, (side_a.describe(), side_b.describe())


def print_comparison(rows: list[MetricComparison], console: Console, title: str = "B relative to A") -> None:
    table = Table(title=title)
    for column in ("metric", "A", "B", "B/A", "p-value", "verdict"):
        table.add_column(column, justify="left" if column in ("metric", "verdict") else "right")
    for row in rows:
        table.add_row(
            f"{row.metric} [{row.unit}]",
            "-" if row.a is None else f"{row.a:.6g}",
            "-" if row.b is None else f"{row.b:.6g}",
            "-" if row.ratio is None else f"{row.ratio:.4f}",
            "-" if row.pvalue is None else f"{row.pvalue:.2g}",
            row.difference.value,
        )
    console.print(table)


def compare_results(a: str, b: str, console: Console, as_json: bool = False) -> int:
    """Two result files, or two runs of the store by id."""
    files = all(Path(x).suffix == ".json" for x in (a, b))
    rows, sides = compare(None if files else store.connect(), a, b)
    if as_json:
        print_json(console, "compare", {"a": sides[0], "b": sides[1], "metrics": rows})
    else:
        print_comparison(rows, console, f"B relative to A (A: {sides[0]}, B: {sides[1]})")
    return ExitCode.OK


def hlo_diff(a: str, b: str, as_json: bool, console: Console) -> int:
    """`jaxbench hlo-diff`: two result files, or two runs of the store by id (the store is opened only
    for an id)."""
    engine = None if all(_is_result_file(x) for x in (a, b)) else store.connect()
    return _show_program_difference(_program_side(engine, a), _program_side(engine, b), as_json, console)


def _show_program_difference(a: ProgramSide, b: ProgramSide, as_json: bool, console: Console) -> int:
    """How the compiled programs of two runs differ (harness/run/program_diff.py)."""
    difference = compare_programs(a, b)
    if as_json:
        print_json(console, "hlo-diff", difference.as_json())
        return ExitCode.OK
    console.print(
        f"{a.name} -> {b.name}: {difference.verdict()} (fingerprints {difference.fingerprints[0][:12]}, "
        f"{difference.fingerprints[1][:12]})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if difference.counts:
        counts = Table(title="what the compiled step holds", title_justify="left")
        for column in ("section", "name", "A", "B", "B - A"):
            counts.add_column(column, justify="right" if column in ("A", "B", "B - A") else "left")
        for change in difference.counts:
            delta = change.after - change.before
            add_plain_row(
                counts, change.section, change.name, str(change.before), str(change.after), f"{delta:+d}"
            )
        console.print(counts)
    if difference.flag_changes:
        flags = Table(title="XLA flags", title_justify="left")
        for column in ("flag", "A", "B"):
            flags.add_column(column)
        for name, before, after in difference.flag_changes:
            add_plain_row(flags, name, before or "(unset)", after or "(unset)")
        console.print(flags)
    quantities = Table(title="XLA's cost analysis and memory plan, per device", title_justify="left")
    for column in ("quantity", "A", "B", "B / A"):
        quantities.add_column(column, justify="left" if column == "quantity" else "right")
    for quantity in difference.quantities:
        add_plain_row(
            quantities,
            quantity.name,
            _count_or_dash(quantity.before),
            _count_or_dash(quantity.after),
            "-" if quantity.ratio is None else f"{quantity.ratio:.4f}",
        )
    console.print(quantities)
    return ExitCode.OK


def _count_or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _is_result_file(reference: str) -> bool:
    return Path(reference).suffix == ".json" or Path(reference).exists()


def _program_side(engine: Engine | None, reference: str) -> ProgramSide:
    if _is_result_file(reference) or engine is None:
        return ProgramSide.of_result(Path(reference))
    if not reference.isdigit():
        raise InvalidInput(f"{reference}: expected a result file or a run id from the store")
    with store.transaction(engine) as session:
        run = session.get(schema.Run, int(reference))
        if run is None:
            raise InvalidInput(f"run {reference}: no such run in the store")
        stored, environment = run.program, run.environment or {}
    flags = parse_xla_flags(str(environment.get("XLA_FLAGS", "")))
    try:
        program = None if stored is None else Program.model_validate(stored)
    except ValidationError as error:  # written by another version of jaxbench
        raise InvalidInput(f"run {reference}: program: {first_problem(error)}") from error
    # The store keeps the run's XLA_FLAGS as it ran (every layer's flags, harness/flags/environment.py).
    return ProgramSide(
        f"run {reference}", program, xla_flags={k.removeprefix("--"): v for k, v in flags.items()}
    )
