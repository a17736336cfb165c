"""What `jaxbench pr-check` is asked to do (prcheck/options.py), checked whole before anything is exported,
installed or run: every flag, each recipe with the --set overrides, the --source URL, the CPUs and the two
folders it writes. A refusal that came only when the verdict is written would cost every run made before it.

    jaxbench pr-check --base main --head HEAD --cpus 99 --out /etc    # exit 1 at once, naming --cpus
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from jaxbench.containers.bump import SourceOverride, parse_source_override
from jaxbench.containers.manifest import load_manifest
from jaxbench.core.cpus import cpu_list, this_process_cpus
from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import folder_to_write
from jaxbench.harness import recipes
from jaxbench.prcheck.options import PRCheckOptions
from jaxbench.prcheck.verdict import check_threshold


@dataclasses.dataclass(frozen=True)
class Checked:
    """The options as the check reads them."""

    benchmarks: tuple[tuple[str, str], ...]
    """(recipe, size) pairs, each once, in the order given."""
    source: SourceOverride | None
    cpus: str | None
    """The CPU list for taskset, in ASCII digits."""


def check_options(options: PRCheckOptions, available_cpus: Collection[int] | None = None) -> Checked:
    """Every option, once known good; a refusal names the flag. Nothing is made, exported or run here."""
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
    cpus = None
    if options.cpus is not None:
        cpus = cpu_list(options.cpus, this_process_cpus() if available_cpus is None else available_cpus)
    source = None if options.source is None else parse_source_override(options.source, load_manifest())
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
    folder_to_write(options.out, "--out")
    folder_to_write(options.work, "--work")
    return Checked(tuple(dict.fromkeys(chosen)), source, cpus)
