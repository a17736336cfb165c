"""What `jaxbench pr-check` is asked to do, and its defaults: all the parser needs, so it imports nothing
heavy (every command builds every subcommand's parser). The checks are prcheck/option_checks.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

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
