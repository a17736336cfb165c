"""Property-based fuzz test of every input the `jaxbench` command reads: recipe files and `--set` overrides,
result files (`ingest`, `compare`), pytest-benchmark files, the `detect-series` CSV, manifests (`manifest
diff`), the store URL (JAXBENCH_DB) and XLA flag strings (`flags`).

Each input is a valid example (tests/support/fuzz_inputs.py) broken by hypothesis (fuzz_mutations.py), run
through `main()`; whatever the input, the exit code is a documented one, no traceback, the store unchanged
when refused, nothing written outside --out, one-line refusals. The same inputs every run (fixed seeds;
SURFACES; the bugs it found: test_fuzz_found_bugs.py). The contract: docs/design.md, "Fuzzing the inputs"; the
time it takes: docs/measurements.md.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q -p no:cacheprovider tests/jaxbench/test_fuzz.py
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from jaxbench.harness import recipes
from jaxbench.harness.flags import profiles
from jaxbench.results import store, synthetic
from tests.jaxbench.fuzz_contract import Command, Sandbox, check, option, sqlite_files
from tests.support import fuzz_inputs as inputs
from tests.support import fuzz_mutations as mutations

# A failure report quotes its input, and these inputs are large on purpose (20,000 brackets).
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


# --- the surfaces: how each input is made, and the command that reads it ------------------------------------


def recipe_command(box: Sandbox, example: tuple[bytes, str | None, int | None]) -> Command:
    recipe, size, seq = example
    return Command(["flops", box.write("recipe.yaml", recipe), *option("size", size), *option("seq", seq)])


def override_command(box: Sandbox, example: tuple[list[str], str | None, str | None]) -> Command:
    """maxtext does not train vit, and says so only after the recipe and its overrides were validated: a
    valid override is refused too, so nothing is ever compiled."""
    overrides, size, steps = example
    sets = [arg for text in overrides for arg in option("set", text)]
    argv = ["run", "vit", "--backend=maxtext", *option("out", box.out), *sets, *option("size", size)]
    return Command([*argv, *option("steps", steps)], out=box.out, never_succeeds=True)


def ingest_command(name: str) -> Callable[[Sandbox, bytes], Command]:
    def command(box: Sandbox, data: bytes) -> Command:
        return Command(["ingest", box.write(name, data)])

    return command


def valid_result(box: Sandbox) -> str:
    """A new valid result file (a run id of its own) in the working folder."""
    return str(synthetic.write(box.cwd, synthetic.run_result(inputs.NIGHT, 0.3), "valid.json"))


def ingest_options_command(box: Sandbox, example: tuple[str | None, str | None]) -> Command:
    night, job = example
    return Command(["ingest", valid_result(box), *option("night", night), *option("ci-job-url", job)])


def either_order(fuzzed: str, valid: str, fuzzed_first: bool) -> list[str]:
    return [fuzzed, valid] if fuzzed_first else [valid, fuzzed]


def compare_command(box: Sandbox, example: tuple[bytes, bool]) -> Command:
    data, fuzzed_first = example
    return Command(
        ["compare", *either_order(box.write("result.json", data), valid_result(box), fuzzed_first)]
    )


def series_command(box: Sandbox, data: bytes) -> Command:
    return Command(["detect-series", box.write("series.csv", data)])


def manifest_command(box: Sandbox, example: tuple[bytes, bool]) -> Command:
    data, fuzzed_first = example
    valid = box.write("valid.yaml", mutations.dump_yaml(synthetic.manifest(jax_commit="d" * 40)).encode())
    return Command(["manifest", "diff", *either_order(box.write("manifest.yaml", data), valid, fuzzed_first)])


def make_url_targets(box: Sandbox) -> None:
    """Files of every kind for a store URL to name (fuzz_inputs.URL_TARGETS): the store itself (a link), a
    JSON file, random bytes, a folder, another program's SQLite database, an empty file."""
    if (box.cwd / "folder").exists():
        return
    (box.cwd / "store.sqlite").symlink_to(box.store)
    box.write("not-a-store.json", b'{"a": 1}')
    box.write("noise.bin", bytes(range(256)) * 4)
    (box.cwd / "folder").mkdir()
    box.write("empty.sqlite", b"")
    with contextlib.closing(sqlite3.connect(box.cwd / "other.sqlite")) as other:
        other.execute("CREATE TABLE people (name TEXT)")
        other.commit()


def url_database(url: str, here: Path) -> frozenset[Path]:
    """The SQLite files a store URL that works may create or change."""
    try:
        database = make_url(url).database
    except (ArgumentError, ValueError):
        return frozenset()
    path = (here / database).resolve() if database else here
    return frozenset(sqlite_files(path)) if path.name else frozenset()


def store_url_command(box: Sandbox, url: str) -> Command:
    make_url_targets(box)
    url = url.replace(inputs.HERE, str(box.cwd))
    writes = url_database(url, box.cwd)
    return Command(["report", "--format=json"], writes=writes, environ={store.DB_ENV: url})


def flags_command(box: Sandbox, example: tuple[str, str, str]) -> Command:
    command, a, b = example
    return Command(["flags", command, "--", *((a, b) if command == "diff" else (a,))])


def flags_check_command(box: Sandbox, flags: str) -> Command:
    return Command(["flags", "check", "--", flags])


NASTY_ARGUMENTS = mutations.arguments(mutations.choice(mutations.NASTY_STRINGS))
SIZES = st.sampled_from(("tiny", "b16", "7b", "TINY")) | NASTY_ARGUMENTS
NIGHTS = (
    st.sampled_from(
        ("2026-11-02", "2026-02-30", "tonight", "20261101", "2031-11-01", "9999-12-31", "0001-01-01")
    )
    | NASTY_ARGUMENTS
)
KNOWN_FLAGS = sorted(
    {name for profile in profiles.available_profiles() for name in profiles.resolve_profile(profile).xla}
    | {"xla_cpu_enable_fast_math", "xla_force_host_platform_device_count"}
)
PROFILE_NAMES = st.sampled_from(("auto", "renames", "../llama2", "HOPPER", *profiles.available_profiles()))
FLAG_SPECS = inputs.flag_strings(KNOWN_FLAGS) | PROFILE_NAMES | NASTY_ARGUMENTS
RESULT_FILES = mutations.file_contents(inputs.run_results(), mutations.dump_json, mutations.RAW_JSON)


@dataclasses.dataclass(frozen=True)
class Surface:
    """One input of `jaxbench`: how examples of it are made, and the command that reads one."""

    name: str
    examples: int
    inputs: st.SearchStrategy[Any]
    command: Callable[[Sandbox, Any], Command]


SURFACES = [
    Surface(
        "recipe-file",
        120,
        st.tuples(
            mutations.file_contents(inputs.recipes(), mutations.dump_yaml, mutations.RAW_YAML),
            st.none() | SIZES,
            st.none() | st.integers(min_value=-1, max_value=2**40),
        ),
        recipe_command,
    ),
    Surface(
        "set-override",
        150,
        st.tuples(
            st.lists(inputs.overrides(recipes.load("vit", "tiny").resolved()), min_size=1, max_size=3),
            st.none() | SIZES,
            st.none() | st.integers(min_value=-2, max_value=2**64) | st.sampled_from(("x", "")),
        ),
        override_command,
    ),
    Surface("result-ingest", 150, RESULT_FILES, ingest_command("result.json")),
    Surface(
        "result-compare",
        80,
        st.tuples(RESULT_FILES, st.booleans()),
        compare_command,
    ),
    Surface(
        "pytest-benchmark",
        120,
        mutations.file_contents(inputs.pytest_benchmark_files(), mutations.dump_json, mutations.RAW_JSON),
        ingest_command("benchmark.json"),
    ),
    Surface(
        "ingest-options",
        60,
        st.tuples(st.none() | NIGHTS, st.none() | NASTY_ARGUMENTS),
        ingest_options_command,
    ),
    Surface("series-csv", 200, inputs.series_csv(), series_command),
    Surface(
        "manifest",
        60,
        st.tuples(
            mutations.file_contents(inputs.manifests(), mutations.dump_yaml, mutations.RAW_YAML),
            st.booleans(),
        ),
        manifest_command,
    ),
    Surface(
        "store-url",
        40,
        inputs.store_urls(well_formed=True),
        store_url_command,
    ),
    Surface(
        "store-url-malformed",
        80,
        inputs.store_urls(well_formed=False),
        store_url_command,
    ),
    Surface(
        "flag-string",
        200,
        st.tuples(st.sampled_from(("diff", "show")), FLAG_SPECS, FLAG_SPECS),
        flags_command,
    ),
    # Few examples: jaxlib is asked about each new flag in a child process (about a second).
    Surface("flag-check", 6, inputs.flag_strings(KNOWN_FLAGS), flags_check_command),
]


def fuzz(surface: Surface, box: Sandbox) -> None:
    """`surface.examples` inputs, each checked in `box`: the same ones on every run, drawn from a seed of
    the surface's name (derandomize would seed from this function's source, so any edit here would draw
    other inputs for every surface). No time limit per example (the first call of a command imports its
    modules), and no shrinking: a failure already shows the command and what it printed, and shrinking one
    would take longer than the whole test."""

    @seed(zlib.crc32(surface.name.encode()))
    @settings(
        max_examples=surface.examples,
        deadline=None,
        database=None,
        phases=(Phase.explicit, Phase.generate),
        report_multiple_bugs=False,
    )
    @given(example=surface.inputs)
    def one(example: Any) -> None:
        check(box, surface.command(box, example))

    one()


@pytest.mark.slow
@pytest.mark.parametrize("surface", [pytest.param(s, id=s.name) for s in SURFACES])
def test_every_input_keeps_the_contract(surface: Surface, sandbox: Sandbox) -> None:
    fuzz(surface, sandbox)
