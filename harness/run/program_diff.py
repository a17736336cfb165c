"""What differs between the compiled programs of two runs: whether XLA compiled the same program (equal
fingerprints) or another one, and then how (counts of fusions, op categories, collectives and custom-call
targets), with XLA's cost estimate and memory plan side by side. Read from the results alone: no HLO file is
needed (harness/measure/hlo.py made the summaries when the runs compiled).

    jaxbench hlo-diff runs/a.json runs/b.json
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from core.errors import InvalidInput
from harness.measure.hlo import CountChange, diff_summaries
from harness.run.result import Program, RunResult


@dataclasses.dataclass(frozen=True)
class Quantity:
    """One figure of both programs: XLA's cost analysis or memory plan."""

    name: str
    before: float | None
    after: float | None

    @property
    def ratio(self) -> float | None:
        if self.before is None or self.after is None or self.before == 0:
            return None
        return self.after / self.before


@dataclasses.dataclass(frozen=True)
class ProgramDifference:
    same_program: bool
    """Equal fingerprints: the same optimized program, so a change in speed lies outside it (the runtime,
    the driver, the kernels' libraries, the machine)."""
    fingerprints: tuple[str, str]
    counts: list[CountChange]
    quantities: list[Quantity]

    def verdict(self) -> str:
        if self.same_program:
            return "same program: a change in speed lies in the runtime, driver, kernels or machine"
        if not self.counts:
            return "program changed: the same instructions, with other shapes, layouts or attributes"
        return f"program changed: {len(self.counts)} counts differ"

    def as_json(self) -> dict[str, Any]:
        return {
            "same_program": self.same_program,
            "fingerprints": list(self.fingerprints),
            "counts": [dataclasses.asdict(change) for change in self.counts],
            "quantities": [dataclasses.asdict(q) | {"ratio": q.ratio} for q in self.quantities],
        }


def program_of(run: RunResult, path: Path) -> Program:
    if run.program is None:
        raise InvalidInput(
            f"{path}: program: this run recorded no compiled program (a framework backend's run, one that "
            "failed to compile, or a result written before programs were recorded); expected a run of the "
            "native backend that compiled"
        )
    return run.program


def compare_programs(a: RunResult, b: RunResult, a_path: Path, b_path: Path) -> ProgramDifference:
    before, after = program_of(a, a_path), program_of(b, b_path)
    memory = [
        Quantity(
            "compiled temp bytes",
            _number(a.memory.compiled_temp_bytes),
            _number(b.memory.compiled_temp_bytes),
        ),
        Quantity(
            "compiled argument bytes",
            _number(a.memory.compiled_argument_bytes),
            _number(b.memory.compiled_argument_bytes),
        ),
    ]
    costs = [
        Quantity(k, before.cost.get(k), after.cost.get(k))
        for k in sorted(before.cost.keys() | after.cost.keys())
    ]
    return ProgramDifference(
        same_program=before.summary.fingerprint == after.summary.fingerprint,
        fingerprints=(before.summary.fingerprint, after.summary.fingerprint),
        counts=diff_summaries(before.summary, after.summary),
        quantities=costs + memory,
    )


def _number(value: int | None) -> float | None:
    return None if value is None else float(value)
