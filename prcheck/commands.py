"""`jaxbench pr-check`: each chosen benchmark on the base and the head of a change, in pairs on this machine,
judged (prcheck/verdict.py) and written as a Markdown table and a JSON verdict.

    jaxbench pr-check --base origin/main --head HEAD                      # a change to this repository
    jaxbench pr-check --base v0.2.8 --source optax=https://github.com/me/optax#fix   # to a component
    make pr-check BASE=... HEAD=... [RECIPES="llama2:tiny vit:tiny"] [REPEATS=5]

Every option is checked first (prcheck/option_checks.py). Exit status 4 (as `detect`'s for an open incident)
when a benchmark regressed beyond the threshold, or the head broke it; 3 when one was never measured (no
pair of runs ran ok on both sides); 0 otherwise, inconclusive included (the table says so).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from jaxbench.containers.bump import SourceOverride
from jaxbench.core.errors import ExitCode
from jaxbench.core.files import file_in, writable_folder, write_atomic
from jaxbench.core.markdown_escape import escape_markdown, markdown_code
from jaxbench.harness.provenance.collection import read_image_info
from jaxbench.prcheck.option_checks import check_options
from jaxbench.prcheck.options import PRCheckOptions
from jaxbench.prcheck.sides import Side, component_sides, repository_root, repository_sides
from jaxbench.prcheck.verdict import BLOCKING, Judgement, PRVerdict, compare, overall
from jaxbench.triage.bench import folder_name, run_measured
from jaxbench.triage.logic import PRACTICAL_FRACTION
from jaxbench.triage.stacks import Measurement

MARKDOWN, VERDICT = "pr-check.md", "pr-check.json"


def make_sides(options: PRCheckOptions, source: SourceOverride | None) -> tuple[Side, Side]:
    work = options.work.absolute()
    if source is not None:
        base_manifest = read_image_info(os.environ).manifest
        return component_sides(source, options.base, work, base_manifest=base_manifest)
    assert options.head is not None
    return repository_sides(repository_root(Path.cwd()), options.base, options.head, work)


def pr_check(options: PRCheckOptions, console: Console) -> int:
    checked = check_options(options)
    base, head = make_sides(options, checked.source)
    console.print(f"pr-check: {base.label} (base) against {head.label} (head)", markup=False)
    judgements = [
        compare(
            _BenchmarkMeasure(options, checked.cpus, base, head, recipe, size, console),
            benchmark=f"{recipe}:{size}",
            threshold=options.threshold,
            repeats=options.repeats,
            max_rounds=options.max_rounds,
            confidence=options.confidence,
        )
        for recipe, size in checked.benchmarks
    ]
    write_verdict(options, base, head, judgements)
    console.print(render_markdown(base, head, judgements, options.threshold), markup=False, soft_wrap=True)
    console.print(f"written: {options.out / MARKDOWN}, {options.out / VERDICT}", markup=False)
    return EXIT_CODES[overall(judgements)]


@dataclasses.dataclass(frozen=True)
class _BenchmarkMeasure:
    """jaxbench.prcheck.verdict's Measure for one benchmark: `jaxbench run` of it on the side asked for."""

    options: PRCheckOptions
    cpus: str | None
    """The CPU list for taskset (jaxbench.core.cpus.cpu_list), or None."""
    base: Side
    head: Side
    recipe: str
    size: str
    console: Console

    def __call__(self, side: str, attempt: int) -> Measurement:
        stack = self.base if side == "base" else self.head
        sets = [argument for text in self.options.overrides for argument in ("--set", text)]
        measurement = run_measured(
            ["run", self.recipe, "--size", self.size, *sets],
            environ=os.environ | dict(stack.environ),
            out=run_folder(self.options.work.absolute(), self.recipe, self.size) / side / str(attempt),
            python=stack.python,
            cwd=stack.cwd,
            prefix=["taskset", "-c", self.cpus] if self.cpus else [],
        )
        step_s = measurement.median_step_s
        step = "" if step_s is None else f", median step {step_s * 1e3:.3f} ms"
        self.console.print(
            f"  {self.recipe}:{self.size} {side} #{attempt}: {measurement.status}{step}", markup=False
        )
        return measurement


def run_folder(work: Path, recipe: str, size: str) -> Path:
    """Where a benchmark's runs go: under `work` whatever form the recipe takes (a name, or a path to a
    file, whose folder must never receive runs nor lose its `*.json` to them)."""
    label = f"{recipe}-{size}"
    name = folder_name(label)
    if name != label:  # a path: its file's name, and a hash so that two files of one name stay apart
        digest = hashlib.sha256(label.encode()).hexdigest()[:12]
        name = f"{folder_name(Path(recipe).stem)}-{size}-{digest}"
    return file_in(work / "runs", name)


def write_verdict(options: PRCheckOptions, base: Side, head: Side, judgements: Sequence[Judgement]) -> None:
    writable_folder(options.out, "--out")
    write_atomic(options.out / MARKDOWN, render_markdown(base, head, judgements, options.threshold))
    document = render_json(base, head, judgements, options)
    write_atomic(options.out / VERDICT, json.dumps(document, indent=2) + "\n")


def render_json(
    base: Side, head: Side, judgements: Sequence[Judgement], options: PRCheckOptions
) -> dict[str, Any]:
    blocking = [j.benchmark for j in judgements if j.verdict in BLOCKING]
    return {
        "verdict": overall(judgements).value,
        "blocking": blocking,
        "base": _side(base),
        "head": _side(head),
        "threshold": options.threshold,
        "confidence": options.confidence,
        "benchmarks": [j.as_json() for j in judgements],
    }


def _side(side: Side) -> Mapping[str, str]:
    return {"label": side.label, "commit": side.commit}


SYMBOL = {
    PRVerdict.OK: "✅ ok",
    PRVerdict.IMPROVEMENT: "🚀 improvement",
    PRVerdict.INCONCLUSIVE: "❔ inconclusive",
    PRVerdict.REGRESSION: "❌ regression",
    PRVerdict.FAILED: "❌ failed",
    PRVerdict.UNMEASURED: "⚠️ unmeasured",
}
EXIT_CODES = {
    PRVerdict.REGRESSION: ExitCode.REGRESSION,
    PRVerdict.UNMEASURED: ExitCode.FAILED,
    PRVerdict.OK: ExitCode.OK,
}
"""The exit status of each overall verdict (jaxbench.prcheck.verdict.overall)."""


def render_markdown(base: Side, head: Side, judgements: Sequence[Judgement], threshold: float) -> str:
    """The table a pull request shows: one row per benchmark, step times as the median of the counted
    runs of each side, the ratio head / base with its interval."""
    lines = [
        f"### jaxbench pr-check: {markdown_code(head.label)} against {markdown_code(base.label)}",
        "",
        "| benchmark | base step (ms) | head step (ms) | head / base | verdict | pairs | note |",
        "|---|---:|---:|---|---|---:|---|",
    ]
    for j in judgements:
        data = j.as_json()
        ratio = "–"
        if j.estimate is not None:
            e = j.estimate
            ratio = f"{e.ratio:.3f} ({e.low:.3f} .. {e.high:.3f}, {e.confidence:.1%})"
        lines.append(
            f"| {markdown_code(j.benchmark)} | {_ms(data['base_median_step_s'])} | "
            f"{_ms(data['head_median_step_s'])} | {ratio} | {SYMBOL[j.verdict]} | {len(j.base_s)} | "
            f"{escape_markdown(j.note)} |"
        )
    lines += [
        "",
        "Pairs of runs in fresh processes on one machine, base first and head first in turn; a paired t "
        "interval of the step time ratio. A regression is an interval wholly above "
        f"{1 + PRACTICAL_FRACTION * threshold:.3f} "
        f"(threshold {threshold:.0%}), ok one within {1 / (1 + threshold):.3f} .. {1 + threshold:.3f}.",
    ]
    return "\n".join(lines) + "\n"


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.3f}"
