"""What differs between the compiled programs of two runs: whether XLA compiled the same program (equal
fingerprints) or another one, and then how (counts of fusions, op categories, collectives and custom-call
targets), with XLA's cost estimate and memory plan side by side. Read from the results (or the store)
alone: no HLO file is needed (harness/measure/hlo.py made the summaries when the runs compiled).

    jaxbench hlo-diff runs/a.json runs/b.json
    jaxbench hlo-diff 1044 1045            # two runs of the store, by id
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.measure.hlo import CountChange, diff_summaries
from jaxbench.harness.measure.stablehlo import program_change_kind, same_input
from jaxbench.harness.runtime.result import Memory, Program, read_result


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
    flag_changes: list[tuple[str, str | None, str | None]] = dataclasses.field(default_factory=list)
    """XLA flags set differently in the two runs: (name, A's value, B's value; None where unset)."""
    same_input: bool | None = None
    """Equal input fingerprints (the program JAX handed XLA); None where either run recorded none."""

    def verdict(self) -> str:
        flags = (
            f"; XLA flags differ: {', '.join(name for name, _, _ in self.flag_changes)}"
            if self.flag_changes
            else ""
        )
        if self.same_program:
            return f"same program: a change in speed lies in the runtime, driver, kernels or machine{flags}"
        how = (
            "the same instructions, with other shapes, layouts or attributes"
            if not self.counts
            else f"{len(self.counts)} counts differ"
        )
        return f"{program_change_kind(self.same_input)}: {how}{flags}"

    def as_json(self) -> dict[str, Any]:
        return {
            "same_program": self.same_program,
            "same_input": self.same_input,
            "fingerprints": list(self.fingerprints),
            "counts": [dataclasses.asdict(change) for change in self.counts],
            "quantities": [dataclasses.asdict(q) | {"ratio": q.ratio} for q in self.quantities],
            "flag_changes": [{"name": n, "a": a, "b": b} for n, a, b in self.flag_changes],
        }


@dataclasses.dataclass(frozen=True)
class ProgramSide:
    """One side of a comparison: a result file's run, or a stored run (whose compiled memory plan the store
    does not keep)."""

    name: str
    program: Program | None
    memory: Memory | None = None
    xla_flags: Mapping[str, str] | None = None
    """The run's effective XLA flags, name -> value; None where unknown."""

    @classmethod
    def of_result(cls, path: Path) -> ProgramSide:
        run = read_result(path)
        flags = (
            None if run.flags is None else {name: setting.value for name, setting in run.flags.xla.items()}
        )
        return cls(str(path), run.program, run.memory, flags)

    def required(self) -> Program:
        if self.program is None:
            raise InvalidInput(
                f"{self.name}: program: this run recorded no compiled program (a framework backend's run, "
                "one that failed to compile, or one written before programs were recorded); expected a run "
                "of the native backend that compiled"
            )
        return self.program


def compare_programs(a: ProgramSide, b: ProgramSide) -> ProgramDifference:
    before, after = a.required(), b.required()
    memory = [
        Quantity(name, _memory(a.memory, field), _memory(b.memory, field))
        for name, field in (
            ("compiled temp bytes", "compiled_temp_bytes"),
            ("compiled argument bytes", "compiled_argument_bytes"),
        )
    ]
    costs = [
        Quantity(k, before.cost.get(k), after.cost.get(k))
        for k in sorted(before.cost.keys() | after.cost.keys())
    ]
    return ProgramDifference(
        same_program=before.summary.fingerprint == after.summary.fingerprint,
        fingerprints=(before.summary.fingerprint, after.summary.fingerprint),
        counts=diff_summaries(before.summary, after.summary),
        quantities=costs + [q for q in memory if q.before is not None or q.after is not None],
        flag_changes=_flag_changes(a.xla_flags, b.xla_flags),
        same_input=same_input(before.input_fingerprint, after.input_fingerprint),
    )


def _flag_changes(
    a: Mapping[str, str] | None, b: Mapping[str, str] | None
) -> list[tuple[str, str | None, str | None]]:
    if a is None or b is None:
        return []
    return [
        (name, a.get(name), b.get(name)) for name in sorted(a.keys() | b.keys()) if a.get(name) != b.get(name)
    ]


def _memory(memory: Memory | None, field: str) -> float | None:
    value = None if memory is None else getattr(memory, field)
    return None if value is None else float(value)
