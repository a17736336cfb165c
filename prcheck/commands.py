"""`jaxbench pr-check`: each chosen benchmark on the base and the head of a change, in pairs on this machine,
judged (prcheck/verdict.py) and written as a Markdown table and a JSON verdict.

    jaxbench pr-check --base origin/main --head HEAD                      # a change to this repository
    jaxbench pr-check --base v0.2.8 --source optax=https://github.com/me/optax#fix   # to a component
    make pr-check BASE=... HEAD=... [RECIPES="llama2:tiny vit:tiny"] [REPEATS=5]

Exit status 4 (as `detect`'s for an open incident) when a benchmark regressed beyond the threshold, or the
head broke it; 0 otherwise, inconclusive included (the table says so).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from containers.bump import parse_source_override
from containers.manifest import load_manifest
from core.errors import ExitCode, InvalidInput
from core.files import writable_folder, write_atomic
from core.markdown import escape_markdown, markdown_code
from harness import recipes
from harness.provenance import read_image_info
from prcheck.sides import Side, component_sides, repository_root, repository_sides
from prcheck.verdict import BLOCKING, Judgement, PRVerdict, check_threshold, compare
from triage.bench import run_measured
from triage.logic import PRACTICAL_FRACTION
from triage.session import Measurement

MARKDOWN, VERDICT = "pr-check.md", "pr-check.json"
DEFAULT_BENCHMARKS = ("llama2:tiny",)


@dataclasses.dataclass(frozen=True)
class PRCheckOptions:
    base: str
    """The base: a revision of this repository, or with `source` a ref of the component's repository."""
    head: str | None = None
    """The head revision of this repository; None with `source` (its REF is the head)."""
    source: str | None = None
    """`COMPONENT=URL#REF`: the change is to that component."""
    benchmarks: tuple[str, ...] = DEFAULT_BENCHMARKS
    """`recipe:size` each."""
    overrides: tuple[str, ...] = ()
    """`--set key.path=value`, for every run of both sides."""
    repeats: int = 5
    max_rounds: int = 3
    threshold: float = 0.05
    confidence: float = 0.95
    out: Path = Path("pr-check")
    work: Path = Path("runs/pr-check")
    cpus: str | None = None
    """Run every benchmark under `taskset -c CPUS` (a quiet core: fewer inconclusive verdicts)."""


def check_options(options: PRCheckOptions) -> list[tuple[str, str]]:
    """The (recipe, size) pairs, once every option is known good: refused before anything is built or run,
    naming the flag."""
    if not options.base.strip():
        raise InvalidInput("--base: expected the base revision (BASE= for make pr-check)")
    if options.source is None and options.head is None:
        raise InvalidInput("--head: expected the head revision (or --source COMPONENT=URL#REF)")
    if options.source is not None and options.head is not None:
        raise InvalidInput("--head: not with --source, whose REF is the head")
    for flag, value in (("--repeats", options.repeats), ("--max-rounds", options.max_rounds)):
        if value < 1:
            raise InvalidInput(f"{flag} {value}: expected a whole number of at least 1")
    if options.repeats < 2:
        raise InvalidInput(f"--repeats {options.repeats}: a paired interval needs at least 2 pairs")
    try:
        check_threshold(options.threshold)
    except ValueError:
        raise InvalidInput(f"--threshold {options.threshold}: expected a fraction such as 0.05") from None
    if options.cpus is not None and not all(
        part.isdigit() for part in options.cpus.replace("-", ",").split(",")
    ):
        raise InvalidInput(f"--cpus {options.cpus!r}: expected a CPU list as taskset takes it, e.g. 1 or 0-3")
    chosen = []
    for item in options.benchmarks:
        recipe, _, size = item.partition(":")
        if not recipe or not size:
            raise InvalidInput(f"--recipes {item!r}: expected recipe:size, e.g. llama2:tiny")
        # Resolving the recipe checks its name, its size and every --set against its model.
        recipes.load(recipe, size, options.overrides)
        chosen.append((recipe, size))
    if not chosen:
        raise InvalidInput("--recipes: expected at least one recipe:size")
    return list(dict.fromkeys(chosen))


def make_sides(options: PRCheckOptions) -> tuple[Side, Side]:
    work = options.work.absolute()
    if options.source is not None:
        source = parse_source_override(options.source, load_manifest())
        base_manifest = read_image_info(os.environ).manifest
        return component_sides(source, options.base, work, base_manifest=base_manifest)
    assert options.head is not None
    return repository_sides(repository_root(Path.cwd()), options.base, options.head, work)


def pr_check(options: PRCheckOptions, console: Console) -> int:
    chosen = check_options(options)
    base, head = make_sides(options)
    console.print(f"pr-check: {base.label} (base) against {head.label} (head)", markup=False)
    judgements = [
        compare(
            _Runs(options, base, head, recipe, size, console),
            benchmark=f"{recipe}:{size}",
            threshold=options.threshold,
            repeats=options.repeats,
            max_rounds=options.max_rounds,
            confidence=options.confidence,
        )
        for recipe, size in chosen
    ]
    write_verdict(options, base, head, judgements)
    console.print(render_markdown(base, head, judgements, options.threshold), markup=False, soft_wrap=True)
    console.print(f"written: {options.out / MARKDOWN}, {options.out / VERDICT}", markup=False)
    return ExitCode.REGRESSION if any(j.verdict in BLOCKING for j in judgements) else ExitCode.OK


@dataclasses.dataclass(frozen=True)
class _Runs:
    """prcheck.verdict's Measure for one benchmark: `jaxbench run` of it on the side asked for."""

    options: PRCheckOptions
    base: Side
    head: Side
    recipe: str
    size: str
    console: Console

    def __call__(self, side: str, attempt: int) -> Measurement:
        stack = self.base if side == "base" else self.head
        sets = [argument for text in self.options.overrides for argument in ("--set", text)]
        folder = f"{self.recipe}-{self.size}"
        measurement = run_measured(
            ["run", self.recipe, "--size", self.size, *sets],
            environ=os.environ | dict(stack.environ),
            out=self.options.work.absolute() / "runs" / folder / side / str(attempt),
            python=stack.python,
            cwd=stack.cwd,
            prefix=["taskset", "-c", self.options.cpus] if self.options.cpus else [],
        )
        step_s = measurement.median_step_s
        step = "" if step_s is None else f", median step {step_s * 1e3:.3f} ms"
        self.console.print(
            f"  {self.recipe}:{self.size} {side} #{attempt}: {measurement.status}{step}", markup=False
        )
        return measurement


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
        "verdict": "regression" if blocking else "ok",
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
}


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
        "Pairs of runs, base then head, in fresh processes on one machine; a paired t interval of the step "
        f"time ratio. A regression is an interval wholly above {1 + PRACTICAL_FRACTION * threshold:.3f} "
        f"(threshold {threshold:.0%}), ok one within {1 / (1 + threshold):.3f} .. {1 + threshold:.3f}.",
    ]
    return "\n".join(lines) + "\n"


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.3f}"
