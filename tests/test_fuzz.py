"""Property-based fuzz test of every input the `jaxbench` command reads (issue 18, "Reliability"): recipe
files and `--set` overrides, result files (`ingest`, `compare`), pytest-benchmark files, the `detect-series`
CSV, manifests (`manifest diff`), the store URL (JAXBENCH_DB) and XLA flag strings (`flags`).

Each input is a valid example broken by hypothesis (tests/fuzz_inputs.py), run through `main()` in this
process, and the command must keep the contract of the README's exit-code table whatever the input:
  1. the exit code is a documented one, never 70 (a bug);
  2. no traceback on stderr;
  3. a refused input leaves the store's rows as they were;
  4. no file is written or removed outside the command's --out (a store URL that works: outside its file);
  5. a refusal is one line on stderr, "error: " and what was wrong (argparse's own usage errors aside).
Nothing is trained: recipe files are read by `flops`, and `--set` is given to `run vit --backend maxtext`,
which refuses that pair only after the recipe and its overrides were validated.

The same inputs are drawn on every run (a fixed seed per surface, no example database). The main test draws
up to 1,266 inputs (each surface's count is in SURFACES); while a surface has a known bug (KNOWN_BUGS) it
stops at its first failure. Measured on the 2-core build machine, in one pytest process: 761 inputs tried
(740 drawn, 21 known-bug inputs) in 38 s for the whole file; with every surface's draws run to the end (the
failures collected instead), about 50 s.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_fuzz.py
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import hashlib
import io
import json
import os
import sqlite3
import warnings
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from core.errors import ExitCode
from harness import recipes
from harness.flags import profiles
from jaxbench.main import main
from results import store, synthetic
from tests import fuzz_inputs as inputs

# A failure report quotes its input, and these inputs are large on purpose (20,000 brackets).
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

DOCUMENTED_CODES = frozenset(int(code) for code in ExitCode) - {int(ExitCode.INTERNAL)}
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")
"""A SQLite database and the files SQLite keeps beside it; even a reader changes their bytes, so the store is
compared by its rows."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int
    stderr: str
    parsed: bool
    """False: argparse refused the command line (it prints its usage, then exits 2)."""


QUIET_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
"""The warnings a fresh interpreter does not show (outside __main__): every other one reaches stderr."""


def invoke(argv: Sequence[str]) -> Outcome:
    """`jaxbench ARGV` in this process: its exit code and stderr, with the warnings a `jaxbench` process
    would print there (pytest would collect them instead); stdout is kept out of the test's log."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.resetwarnings()
        for category in QUIET_BY_DEFAULT:
            warnings.simplefilter("ignore", category)
        try:
            code, parsed = main(list(argv)), True
        except SystemExit as exit_:
            code, parsed = (exit_.code if isinstance(exit_.code, int) else 2), False
    shown = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught)
    return Outcome(code, shown + stderr.getvalue(), parsed)


def sqlite_files(database: Path) -> set[Path]:
    return {database.with_name(database.name + suffix) for suffix in SQLITE_SUFFIXES}


@dataclasses.dataclass(frozen=True)
class Sandbox:
    """The commands' working folder, three folders below `root` so that '../../..' stays inside it, and a
    SQLite store holding one run; everything under `root` is compared before and after each command."""

    root: Path

    @property
    def store(self) -> Path:
        return self.root / "store.sqlite"

    @property
    def cwd(self) -> Path:
        return self.root / "c1" / "c2" / "cwd"

    @property
    def out(self) -> Path:
        return self.cwd / "out"

    def write(self, name: str, data: bytes) -> str:
        (self.cwd / name).write_bytes(data)
        return str(self.cwd / name)

    def files(self) -> dict[str, str]:
        """Relative path -> sha256 of every file under `root` but the store's, "folder" for a folder and
        the target for a symbolic link."""
        found = {}
        skip = sqlite_files(self.store)
        for folder, names, files in os.walk(self.root):
            for name in names + files:
                path = Path(folder, name)
                if path.is_symlink():
                    found[str(path.relative_to(self.root))] = f"-> {os.readlink(path)}"
                elif path.is_dir():
                    found[str(path.relative_to(self.root))] = "folder"
                elif path not in skip:
                    found[str(path.relative_to(self.root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        return found

    def rows(self) -> dict[str, list[str]]:
        """Every row of every table of the store, read over a plain read-only connection."""
        with contextlib.closing(sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)) as connection:
            names = "SELECT name FROM sqlite_master WHERE type='table'"
            tables = [name for (name,) in connection.execute(names)]
            return {t: sorted(map(repr, connection.execute(f'SELECT * FROM "{t}"'))) for t in tables}


@dataclasses.dataclass(frozen=True)
class Command:
    """A `jaxbench` command line, and what it may change."""

    argv: list[str]
    out: Path | None = None
    """The command's --out: it may write there."""
    writes: frozenset[Path] = frozenset()
    """Files it may write when it succeeds, besides the store: the database a store URL names."""
    environ: dict[str, str] = dataclasses.field(default_factory=dict)
    never_succeeds: bool = False
    """It must be refused whatever the input: the guard that nothing trains."""

    def may_change(self, relative: str, box: Sandbox, succeeded: bool) -> bool:
        path = box.root / relative
        writes = self.writes if succeeded else frozenset()
        # A folder above a file it may write may be made for it.
        return (self.out is not None and path.is_relative_to(self.out)) or any(
            w.is_relative_to(path) for w in writes
        )


def check(box: Sandbox, command: Command, *, one_line: bool = True) -> None:
    """Run `command` in `box` and check the contract of the module docstring."""
    files, rows = box.files(), box.rows()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in command.environ.items():
            patch.setenv(name, value)
        outcome = invoke(command.argv)
    shown = " ".join(arg if len(arg) < 200 else f"{arg[:200]}..." for arg in command.argv)
    shown = f"{' '.join(f'{k}={v!r}' for k, v in command.environ.items())} jaxbench {shown}\n{outcome.stderr}"
    assert outcome.code in DOCUMENTED_CODES, f"exit {outcome.code}: {shown}"
    assert "Traceback" not in outcome.stderr, shown
    succeeded = outcome.code == ExitCode.OK
    assert not (succeeded and command.never_succeeds), f"succeeded, but must be refused: {shown}"
    after = box.files()
    if command.writes and after != files:
        # The store it opened closes its SQLite connections when collected, and closing the last one folds
        # the -wal file into the database: collected now, that shows as this command's change, not the next's.
        gc.collect()
        after = box.files()
    changed = {name for name in files.keys() | after.keys() if files.get(name) != after.get(name)}
    unexpected = sorted(name for name in changed if not command.may_change(name, box, succeeded))
    assert not unexpected, f"changed {unexpected}: {shown}"
    if succeeded:
        return
    assert box.rows() == rows, f"a refused input changed the store: {shown}"
    if one_line and outcome.parsed:
        lines = outcome.stderr.strip("\n").split("\n")
        assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0][7:].strip(), (
            f"not one line: {shown}"
        )


def option(name: str, value: object | None) -> list[str]:
    """`--name=value`, or nothing for None (the `=` form, so that a value like '-h' stays a value)."""
    return [] if value is None else [f"--{name}={value}"]


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
    valid = box.write("valid.yaml", inputs.dump_yaml(synthetic.manifest(jax_commit="d" * 40)).encode())
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


NASTY_ARGUMENTS = inputs.arguments(inputs.choice(inputs.NASTY_STRINGS))
SIZES = st.sampled_from(("tiny", "b16", "7b", "TINY")) | NASTY_ARGUMENTS
NIGHTS = st.sampled_from(("2026-11-02", "2026-02-30", "tonight", "20261101", "2031-11-01")) | NASTY_ARGUMENTS
"""--night values, none centuries away: the store writes a gap row for every night between a series' last
night and the new one, millions for a night in 9999 (minutes and gigabytes of work, though no contract broken
here), which would drown every other example."""
KNOWN_FLAGS = sorted(
    {name for profile in profiles.available_profiles() for name in profiles.resolve_profile(profile).xla}
    | {"xla_cpu_enable_fast_math", "xla_force_host_platform_device_count"}
)
PROFILE_NAMES = st.sampled_from(("auto", "renames", "../llama2", "HOPPER", *profiles.available_profiles()))
FLAG_SPECS = inputs.flag_strings(KNOWN_FLAGS) | PROFILE_NAMES | NASTY_ARGUMENTS
RESULT_FILES = inputs.file_contents(inputs.run_results(), inputs.dump_json, inputs.RAW_JSON)


JSON_BUGS = "json-deep, json-5000-digits, json-lone-surrogate, resolved-not-a-mapping"


@dataclasses.dataclass(frozen=True)
class Surface:
    """One input of `jaxbench`: how examples of it are made, and the command that reads one."""

    name: str
    examples: int
    inputs: st.SearchStrategy[Any]
    command: Callable[[Sandbox, Any], Command]
    crashes: str | None = None
    """The known bugs (names in KNOWN_BUGS) that break invariants 1 to 4 here: the main test is expected to
    fail until they are fixed."""
    multi_line: str | None = None
    """The known bugs that make refusals here take several lines: the main test leaves that property to
    test_refusals_are_one_line (expected to fail; run once `crashes` is None). None: the main test checks
    it."""


SURFACES = [
    Surface(
        "recipe-file",
        120,
        st.tuples(
            inputs.file_contents(inputs.recipes(), inputs.dump_yaml, inputs.RAW_YAML),
            st.none() | SIZES,
            st.none() | st.integers(min_value=-1, max_value=2**40),
        ),
        recipe_command,
        multi_line="multi-line-yaml-error, multi-line-validation",
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
        crashes="set-yaml-bad-date",
        multi_line="multi-line-validation",
    ),
    Surface("result-ingest", 150, RESULT_FILES, ingest_command("result.json"), crashes=JSON_BUGS),
    Surface(
        "result-compare",
        80,
        st.tuples(RESULT_FILES, st.booleans()),
        compare_command,
        crashes=JSON_BUGS,
    ),
    Surface(
        "pytest-benchmark",
        120,
        inputs.file_contents(inputs.pytest_benchmark_files(), inputs.dump_json, inputs.RAW_JSON),
        ingest_command("benchmark.json"),
        crashes=JSON_BUGS,
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
        st.tuples(inputs.file_contents(inputs.manifests(), inputs.dump_yaml, inputs.RAW_YAML), st.booleans()),
        manifest_command,
        crashes="manifest-number-commit, manifest-markup-name, manifest-yaml-deep",
        multi_line="multi-line-manifest-yaml",
    ),
    Surface(
        "store-url",
        40,
        inputs.store_urls(well_formed=True),
        store_url_command,
        crashes="refused-url-makes-folders",
        multi_line="url-query-warning",
    ),
    Surface(
        "store-url-malformed",
        80,
        inputs.store_urls(well_formed=False),
        store_url_command,
        crashes="sqlite-url-with-host, url-port-not-a-number, refused-url-makes-folders",
        multi_line="url-query-warning",
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


def fuzz(surface: Surface, box: Sandbox, *, one_line: bool) -> None:
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
        check(box, surface.command(box, example), one_line=one_line)

    one()


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    box = Sandbox(tmp_path)
    box.cwd.mkdir(parents=True)
    monkeypatch.chdir(box.cwd)
    monkeypatch.setenv(store.DB_ENV, f"sqlite:///{box.store}")
    valid = synthetic.write(box.root / "seed", synthetic.run_result(inputs.NIGHT, 0.25))
    assert invoke(["ingest", str(valid)]).code == ExitCode.OK
    return box


def expected_failure(reason: str | None) -> list[pytest.MarkDecorator]:
    """Strict: a test that passes once its bugs are fixed fails, to say so. Only the contract's
    AssertionError counts as the expected failure, never a bug of the test; hypothesis calls it flaky where
    the failing command left something behind (a folder), so that replaying it passed."""
    if reason is None:
        return []
    return [pytest.mark.xfail(strict=True, raises=(AssertionError, FlakyFailure), reason=reason)]


def known_bugs(names: str | None) -> list[pytest.MarkDecorator]:
    return expected_failure(None if names is None else f"KNOWN_BUGS: {names}")


@pytest.mark.parametrize(
    "surface", [pytest.param(s, id=s.name, marks=known_bugs(s.crashes)) for s in SURFACES]
)
def test_every_input_keeps_the_contract(surface: Surface, sandbox: Sandbox) -> None:
    fuzz(surface, sandbox, one_line=surface.multi_line is None)


@pytest.mark.parametrize(
    "surface",
    [
        pytest.param(s, id=s.name, marks=known_bugs(s.multi_line))
        for s in SURFACES
        if s.multi_line is not None and s.crashes is None
    ],
)
def test_refusals_are_one_line(surface: Surface, sandbox: Sandbox) -> None:
    """The surfaces whose refusals still take several lines, on the main test's examples (it stops at the
    first such refusal): once fixed, this passes, strict xfail fails it, and the surface's `multi_line` goes,
    which moves the check back into the main test."""
    fuzz(surface, sandbox, one_line=True)


# --- the bugs the fuzzing found, each as its smallest input -------------------------------------------------


def _argparse_keeps_two_dashes() -> bool:
    """Whether this interpreter's argparse hands `--name=--` over as '--' (3.12.1's gives an empty list)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--name")
    return bool(parser.parse_args(["--name=--"]).name == "--")


@dataclasses.dataclass(frozen=True)
class KnownBug:
    """An input that breaks the contract today: files written into the working folder, the command line,
    the environment, and where the bug is."""

    name: str
    where: str
    argv: list[str]
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)
    environ: dict[str, str] = dataclasses.field(default_factory=dict)
    present: bool = True
    """False where this interpreter or library does not have it."""


DEEP_JSON = b"[" * inputs.DEEP + b"]" * inputs.DEEP
DEEP_YAML = DEEP_JSON
RESULT = json.dumps(synthetic.run_result(inputs.NIGHT, 0.25))
MANIFEST = "flavor: x\ncomponents:\n  {name}: {{repository: 'https://github.com/a/b', commit: {commit}}}\n"
KNOWN_BUGS = [
    KnownBug(
        "json-lone-surrogate",
        "results/ingest.py: content_hash encodes a string holding a lone surrogate ('\\ud800'): exit 70",
        ["ingest", "x.json"],
        {"x.json": b'{"a": "\\ud800"}'},
    ),
    KnownBug(
        "json-5000-digits",
        "results/ingest.py: read_result_file lets json's ValueError (over 4,300 digits) through: exit 70",
        ["ingest", "x.json"],
        {"x.json": b"[" + b"1" * 5000 + b"]"},
    ),
    KnownBug(
        "json-deep",
        "results/ingest.py: read_result_file lets json's RecursionError through: exit 70",
        ["compare", "x.json", "x.json"],
        {"x.json": DEEP_JSON},
    ),
    KnownBug(
        "resolved-not-a-mapping",
        "results/identity.py: recipe_settings takes recipe.resolved.train for a mapping: exit 70",
        ["ingest", "x.json"],
        {"x.json": RESULT.replace('"train": {', '"train": true, "was": {').encode()},
    ),
    KnownBug(
        "recipe-yaml-deep",
        "harness/recipes.py: load_recipe_file lets PyYAML's RecursionError through: exit 70",
        ["flops", "x.yaml"],
        {"x.yaml": b"family: vit\nbase: " + DEEP_YAML},
    ),
    KnownBug(
        "recipe-yaml-bad-date",
        "harness/recipes.py: load_recipe_file lets PyYAML's ValueError (month 13) through: exit 70",
        ["flops", "x.yaml"],
        {"x.yaml": b"family: vit\ndefault_size: 2026-13-45\n"},
    ),
    KnownBug(
        "set-yaml-bad-date",
        "harness/recipes.py: parse_override lets PyYAML's ValueError (month 13) and RecursionError (deep "
        "nesting) through: exit 70",
        ["run", "vit", "--backend=maxtext", "--set=description=2026-13-45"],
    ),
    KnownBug(
        "manifest-yaml-deep",
        "containers/diff.py: read_manifest_source lets PyYAML's RecursionError through: exit 70",
        ["manifest", "diff", "x.yaml", "x.yaml"],
        {"x.yaml": b"components: " + DEEP_YAML},
    ),
    KnownBug(
        "manifest-markup-name",
        "containers/commands.py: manifest_diff_command renders component names as rich markup: exit 70",
        ["manifest", "diff", "a.yaml", "b.yaml"],
        {
            "a.yaml": MANIFEST.format(name="'[/oops]'", commit="a" * 40).encode(),
            "b.yaml": MANIFEST.format(name="'[/oops]'", commit="b" * 40).encode(),
        },
    ),
    KnownBug(
        "manifest-number-commit",
        "containers/diff.py: manifest_pins takes any commit; containers/commands.py: _short slices it "
        "(exit 70)",
        ["manifest", "diff", "a.yaml", "b.yaml"],
        {
            "a.yaml": MANIFEST.format(name="jax", commit="a" * 40).encode(),
            "b.yaml": MANIFEST.format(name="jax", commit="1.5").encode(),
        },
    ),
    KnownBug(
        "sqlite-url-with-host",
        "results/store.py: connect lets create_engine's ArgumentError (sqlite://NAME) through: exit 70",
        ["report"],
        environ={store.DB_ENV: "sqlite://store.sqlite"},
    ),
    KnownBug(
        "url-port-not-a-number",
        "results/store.py: _parse lets make_url's ValueError (a port that is no number) through: exit 70",
        ["report"],
        environ={store.DB_ENV: "postgresql+psycopg://127.0.0.1:port/db"},
    ),
    KnownBug(
        "refused-url-makes-folders",
        "results/store.py: _engine makes the SQLite file's folders before the file is opened (or the driver "
        "found): exit 1, but new/sub/ is left behind",
        ["report"],
        environ={store.DB_ENV: "sqlite:///new/sub/.."},
    ),
    KnownBug(
        "url-query-warning",
        "results/store.py: a query argument the driver ignores (?mode=ro) makes SQLAlchemy print two "
        "SAWarnings of two lines each above the refusal",
        ["report"],
        environ={store.DB_ENV: "sqlite:///.?mode=ro"},
    ),
    KnownBug(
        "two-dashes",
        "Python 3.12.1's argparse gives `--set=--` as [] (fixed in later Pythons); harness/recipes.py: "
        "parse_override takes it for a string: exit 70 (and `ingest --night=--`: core/dates.py)",
        ["run", "vit", "--backend=maxtext", "--set=--"],
        present=not _argparse_keeps_two_dashes(),
    ),
    KnownBug(
        "multi-line-yaml-error",
        "harness/recipes.py: load_recipe_file quotes PyYAML's message, which takes two lines or more",
        ["flops", "x.yaml"],
        {"x.yaml": b"family: [vit\n"},
    ),
    KnownBug(
        "multi-line-validation",
        "harness/recipes.py: _describe gives one line per problem (here two: str or tuple)",
        ["run", "vit", "--backend=maxtext", "--set=parallelism.rules.embed=1"],
    ),
    KnownBug(
        "multi-line-manifest-yaml",
        "containers/diff.py: read_manifest_source quotes PyYAML's message, which takes two lines or more",
        ["manifest", "diff", "x.yaml", "x.yaml"],
        {"x.yaml": b"components: [\n"},
    ),
    KnownBug(
        "multi-line-unknown-flags",
        "harness/flags/check.py: check_or_drop lists unknown flags one a line",
        ["flags", "check", "--", "--xla_no_such_flag=1"],
    ),
    KnownBug(
        "multi-line-echo",
        "core/dates.py: parse_date repeats the --night value as given, line break included",
        ["ingest", "x.json", "--night=a\nb"],
        {"x.json": RESULT.encode()},
    ),
    KnownBug(
        "multi-line-key",
        "core/schema.py: first_problem names a field as given, line break included",
        ["ingest", "x.json"],
        {"x.json": RESULT.replace("{", '{"a\\nb": 1, ', 1).encode()},
    ),
]


@pytest.mark.parametrize(
    "bug",
    [
        pytest.param(bug, id=bug.name, marks=expected_failure(bug.where if bug.present else None))
        for bug in KNOWN_BUGS
    ],
)
def test_known_bug(bug: KnownBug, sandbox: Sandbox) -> None:
    """Each bug the fuzzing found, on its smallest input: strict xfail says when one is fixed."""
    for name, data in bug.files.items():
        sandbox.write(name, data)
    check(sandbox, Command(bug.argv, environ=bug.environ))
