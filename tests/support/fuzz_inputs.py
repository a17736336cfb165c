"""What the fuzz test (tests/jaxbench/test_fuzz.py) feeds `jaxbench`: a valid example of every kind of input
it reads (run results, pytest-benchmark files, recipes, manifests), and strategies for the text inputs (the
`detect-series` CSV, `--set` overrides, XLA flag strings, the store URL). tests/support/fuzz_mutations.py
breaks the valid examples.

Mutating valid examples, rather than generating from nothing, reaches the checks behind the parser: a random
file is refused on its first byte, a valid one with one wrong field gets as far as the store.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

import yaml
from hypothesis import strategies as st

from jaxbench.results import synthetic
from tests.conftest import REPO
from tests.support.fuzz_mutations import NASTY_STRINGS, RAW_YAML, arguments, choice, damaged, dotted_paths

# --- the valid examples -------------------------------------------------------------------------------------

NIGHT = dt.date(2026, 11, 1)


def run_results() -> st.SearchStrategy[dict[str, Any]]:
    """Harness results (results/synthetic.py): each a new run id, a night in November 2026."""
    return st.integers(min_value=0, max_value=29).map(
        lambda day: synthetic.run_result(NIGHT + dt.timedelta(days=day), 0.25)
    )


def pytest_benchmark_files() -> st.SearchStrategy[dict[str, Any]]:
    """pytest-benchmark files: another project's suite, and ours (machine_info.jaxbench: provenance, the
    failed benchmarks, the schedule)."""
    provenance = synthetic.run_result(NIGHT, 0.25)["provenance"]

    def document(ours: bool) -> dict[str, Any]:
        entry = {
            "name": "test_matmul[bfloat16-256]",
            "fullname": "tests/test_matmul.py::test_matmul[bfloat16-256]",
            "params": {"dtype": "bfloat16", "m": 256},
            "extra_info": {"device_kind": "cpu", "device_count": 1, "tflops": 0.5, "gb_per_s": 3.0},
            "stats": {"median": 0.01, "iqr": 0.001, "data": [0.009, 0.01, 0.011]},
        }
        failed = {**entry, "name": "test_scan[1]", "status": "failed", "reason": "wrong result"}
        machine: dict[str, Any] = {
            "node": "bench-host",
            "python_version": "3.12.1",
            "cpu": {"brand_raw": "x"},
        }
        if ours:
            machine["jaxbench"] = {"provenance": provenance, "failed": [failed], "schedule": "nightly"}
        return {
            "machine_info": machine,
            "commit_info": {"id": "c" * 40},
            "datetime": "2026-11-01T02:00:00",
            "benchmarks": [entry],
        }

    return st.booleans().map(document)


def recipes() -> st.SearchStrategy[dict[str, Any]]:
    """The shipped recipe files, parsed."""
    return st.sampled_from(sorted((REPO / "recipes").glob("*.yaml"))).map(
        lambda path: yaml.safe_load(path.read_text())
    )


def manifests() -> st.SearchStrategy[dict[str, Any]]:
    """The repository's pin manifest, and an image's resolved one (results/synthetic.py)."""
    pins = yaml.safe_load((REPO / "containers" / "manifest.yaml").read_text())
    return choice((pins, synthetic.manifest()))


# --- text inputs: CSV, --set, flag strings ------------------------------------------------------------------

CSV_HEADERS: tuple[list[str], ...] = (
    ["value"],
    ["date", "value"],
    ["value", "date", "note"],
    ["Value"],
    ["date"],
    [],
)
CSV_CELLS = ("1e308", "-1e308", "5e-324", "0", "-0", "nan", "inf", "-inf", "1_0", "0x1p3", " 1 ", "")


@st.composite
def series_csv(draw: st.DrawFn) -> bytes:
    """A `detect-series` CSV: a header with or without value and date, rows of numbers, extreme numbers
    and anything else, line endings of every platform."""
    header = draw(st.one_of(st.sampled_from(CSV_HEADERS), st.lists(st.text(max_size=8), max_size=3)))
    numbers = st.floats(allow_nan=False, allow_infinity=False).map(repr)
    cell = st.one_of(numbers, numbers, st.sampled_from(CSV_CELLS), choice(NASTY_STRINGS))
    width = max(len(header), 1)
    rows = draw(st.lists(st.lists(cell, min_size=width, max_size=width + 1), max_size=40))
    text = io.StringIO()
    csv.writer(text, lineterminator=draw(st.sampled_from(("\n", "\r\n", "\r")))).writerows([header, *rows])
    return draw(st.one_of(damaged(text.getvalue()), st.binary(max_size=300)))


RECIPE_VALUES = ("1", "0", "-1", "8", "true", "null", "~", "[1, 2]", "{a: 1}", "fp8", "xla", "full", "")
"""--set values: YAML for a number, a flag, nothing, a list, a mapping, and names some fields take."""


def overrides(tree: dict[str, Any]) -> st.SearchStrategy[str]:
    """`--set key.path=value`: a field of `tree` (a resolved recipe) or a mangled one, a value of any kind."""
    key = st.one_of(
        st.sampled_from(dotted_paths(tree)),
        st.builds(
            lambda path, suffix: path + suffix,
            st.sampled_from(dotted_paths(tree)),
            st.sampled_from((".x", "..", ".", ".0", "[0]")),
        ),
        choice(NASTY_STRINGS),
        st.text(max_size=12),
    )
    value = st.one_of(st.sampled_from(RECIPE_VALUES), choice(RAW_YAML), choice(NASTY_STRINGS), st.text())
    return arguments(st.one_of(st.builds(lambda k, v: f"{k}={v}", key, value), st.text(max_size=30)))


FLAG_VALUES = ("true", "false", "0", "-1", "1073741824", "99999999999999999999", "on", "", "'a b'", '"')


def flag_strings(names: list[str]) -> st.SearchStrategy[str]:
    """XLA flag strings as `flags check`, `flags diff` and `ab` take them: known flags with any value, unknown
    ones, repeats, bare words, unbalanced quotes."""
    name = st.one_of(st.sampled_from(names), choice(NASTY_STRINGS), st.text(max_size=10))
    value = st.one_of(st.sampled_from(FLAG_VALUES), choice(NASTY_STRINGS), st.text(max_size=10))
    token = st.one_of(
        st.builds(lambda n, v: f"--{n}={v}", name, value),
        st.builds(lambda n: f"--{n}", name),
        choice(NASTY_STRINGS),
    )
    joined = st.builds(
        lambda parts, gap: gap.join(parts), st.lists(token, max_size=4), st.sampled_from(" \t\n")
    )
    return arguments(joined)


# --- the store URL ------------------------------------------------------------------------------------------

HERE = "<cwd>"
"""Stands for the command's working folder in a URL (an absolute path), filled in by the test."""
SCHEMES = ("sqlite", "sqlite+pysqlite", "SQLite", "sqlite+nodriver", "postgresql", "postgresql+psycopg")
"""The store's databases; the first three are SQLite's own spellings."""
SCHEMES_ELSEWHERE = ("postgresql+asyncpg", "postgres", "mysql", "http", "")
"""Not the store's: a driver that is not installed, other databases, no database at all."""
SEPARATORS = ("://", ":///", ":////", ":/", ":", "")
URL_TARGETS = (
    "store.sqlite",
    "not-a-store.json",
    "noise.bin",
    "folder",
    "other.sqlite",
    "empty.sqlite",
    "new",
)
"""What the test puts in the working folder: the store, files that are no store, a folder; "new" is none."""
URL_PARTS = (*URL_TARGETS, "..", ":memory:", "", "?mode=ro", "?timeout=x", "%2e%2e", "#")
SERVERS = ("127.0.0.1:1", "user:p@ss@127.0.0.1:1", "[::1]:1", "127.0.0.1:notaport", "127.0.0.1:99999", "")
"""Servers that answer at once: nothing listens on port 1 of this machine, and the others do not parse.
Never a host name, whose lookup could wait on the network."""


def store_urls(*, well_formed: bool) -> st.SearchStrategy[str]:
    """JAXBENCH_DB: a scheme, a separator, then a path among the test's files (relative, at most three '..'
    up, or absolute), a server, or anything. `well_formed`: a SQLite scheme and a path, as docs/store.md
    writes them (sqlite:///relative, sqlite:////absolute); else any scheme and separator."""
    segment = st.one_of(st.sampled_from(URL_PARTS), st.text(max_size=8).filter(lambda t: "/" not in t))
    path = st.lists(segment, min_size=1, max_size=3).map("/".join)
    rest = st.one_of(
        path,
        path.map(lambda p: f"{HERE}/{p}"),
        st.builds(lambda server, p: f"{server}/{p}", st.sampled_from(SERVERS), path),
        choice(NASTY_STRINGS).filter(lambda t: ".." not in t),
    )
    schemes, separators = (
        (SCHEMES[:3], (":///",)) if well_formed else ((*SCHEMES, *SCHEMES_ELSEWHERE), SEPARATORS)
    )
    url = st.builds(
        lambda scheme, separator, rest: scheme + separator + rest,
        st.sampled_from(schemes),
        st.sampled_from(separators),
        rest,
    )
    return arguments(url)
