"""Property-based fuzz test of every input the `jaxbench` command reads: recipe files and `--set` overrides,
result files (`ingest`, `compare`), pytest-benchmark files, the `detect-series` CSV, manifests (`manifest
diff`), the store URL (JAXBENCH_DB) and XLA flag strings (`flags`).

Each input is a valid example broken by hypothesis (tests/support/fuzz_inputs.py), run through `main()`;
whatever the input, the exit code is a documented one, no traceback, the store unchanged when refused, nothing
written outside --out, one-line refusals. The same inputs every run (fixed seeds; SURFACES, FOUND_BUGS). The
contract: docs/design.md, "Fuzzing the inputs"; the time it takes: docs/measurements.md.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q -p no:cacheprovider tests/jaxbench/test_fuzz.py
"""

from __future__ import annotations

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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from core.errors import ExitCode
from harness import recipes
from harness.flags import profiles
from jaxbench.main import main
from results import store, synthetic
from tests.support import fuzz_inputs as inputs

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


@contextlib.contextmanager
def as_a_process() -> Iterator[io.StringIO]:
    """Inside, what a `jaxbench` process would print on stderr, the warnings it would show among it (pytest
    would collect them instead), goes to the StringIO yielded; stdout is kept out of the test's log."""
    stderr = io.StringIO()
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(stderr),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.resetwarnings()
        for category in QUIET_BY_DEFAULT:
            warnings.simplefilter("ignore", category)
        try:
            yield stderr
        finally:
            for w in caught:
                stderr.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))


def exit_of(exit_: SystemExit) -> int:
    """The exit code a SystemExit stands for (argparse's: 2 with a message, 0 after --help)."""
    return exit_.code if isinstance(exit_.code, int) else 2


def invoke(argv: Sequence[str]) -> Outcome:
    """`jaxbench ARGV` in this process: its exit code and what it printed on stderr."""
    with as_a_process() as stderr:
        try:
            code, parsed = main(list(argv)), True
        except SystemExit as exit_:
            code, parsed = exit_of(exit_), False
    return Outcome(code, stderr.getvalue(), parsed)


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
        """Relative path -> sha256 of every file under `root` but the store's, "folder" for a folder,
        "special" for a named pipe and the target for a symbolic link."""
        found = {}
        skip = sqlite_files(self.store)
        for folder, names, files in os.walk(self.root):
            for name in names + files:
                path = Path(folder, name)
                if path in skip:  # the store's files: SQLite may remove its -wal file at any moment
                    continue
                if path.is_symlink():
                    found[str(path.relative_to(self.root))] = f"-> {os.readlink(path)}"
                elif path.is_dir():
                    found[str(path.relative_to(self.root))] = "folder"
                elif not path.is_file():  # a named pipe: opening it would wait for a writer
                    found[str(path.relative_to(self.root))] = "special"
                else:
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


def check(box: Sandbox, command: Command) -> None:
    """Run `command` in `box` and check the contract (docs/design.md, "Fuzzing the inputs")."""
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
    if outcome.parsed:
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
RESULT_FILES = inputs.file_contents(inputs.run_results(), inputs.dump_json, inputs.RAW_JSON)


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
            inputs.file_contents(inputs.recipes(), inputs.dump_yaml, inputs.RAW_YAML),
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
        inputs.file_contents(inputs.pytest_benchmark_files(), inputs.dump_json, inputs.RAW_JSON),
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
        st.tuples(inputs.file_contents(inputs.manifests(), inputs.dump_yaml, inputs.RAW_YAML), st.booleans()),
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


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    box = Sandbox(tmp_path)
    box.cwd.mkdir(parents=True)
    monkeypatch.chdir(box.cwd)
    monkeypatch.setenv(store.DB_ENV, f"sqlite:///{box.store}")
    valid = synthetic.write(box.root / "seed", synthetic.run_result(inputs.NIGHT, 0.25))
    assert invoke(["ingest", str(valid)]).code == ExitCode.OK
    return box


@pytest.mark.slow
@pytest.mark.parametrize("surface", [pytest.param(s, id=s.name) for s in SURFACES])
def test_every_input_keeps_the_contract(surface: Surface, sandbox: Sandbox) -> None:
    fuzz(surface, sandbox)


# --- the bugs the fuzzing found, each as its smallest input -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FoundBug:
    """An input that broke the contract: files written into the working folder, the command line, the
    environment, and what was wrong (fixed since; kept so that it stays fixed)."""

    name: str
    was: str
    argv: list[str]
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)
    environ: dict[str, str] = dataclasses.field(default_factory=dict)
    refused: bool = True
    """False where the input is valid and the command must now succeed."""


DEEP_JSON = b"[" * inputs.DEEP + b"]" * inputs.DEEP
DEEP_YAML = DEEP_JSON
RESULT = json.dumps(synthetic.run_result(inputs.NIGHT, 0.25))
MANIFEST = "flavor: x\ncomponents:\n  {name}: {{repository: 'https://github.com/a/b', commit: {commit}}}\n"
FOUND_BUGS = [
    FoundBug(
        "json-lone-surrogate",
        "results/ingest.py: content_hash encodes a string holding a lone surrogate ('\\ud800'): exit 70",
        ["ingest", "x.json"],
        {"x.json": b'{"a": "\\ud800"}'},
    ),
    FoundBug(
        "json-5000-digits",
        "results/ingest.py: read_result_file lets json's ValueError (over 4,300 digits) through: exit 70",
        ["ingest", "x.json"],
        {"x.json": b"[" + b"1" * 5000 + b"]"},
    ),
    FoundBug(
        "json-deep",
        "results/ingest.py: read_result_file lets json's RecursionError through: exit 70",
        ["compare", "x.json", "x.json"],
        {"x.json": DEEP_JSON},
    ),
    FoundBug(
        "resolved-not-a-mapping",
        "results/identity.py: recipe_settings takes recipe.resolved.train for a mapping: exit 70",
        ["ingest", "x.json"],
        {"x.json": RESULT.replace('"train": {', '"train": true, "was": {').encode()},
    ),
    FoundBug(
        "recipe-yaml-deep",
        "harness/recipes.py: load_recipe_file lets PyYAML's RecursionError through: exit 70",
        ["flops", "x.yaml"],
        {"x.yaml": b"family: vit\nbase: " + DEEP_YAML},
    ),
    FoundBug(
        "recipe-yaml-bad-date",
        "harness/recipes.py: load_recipe_file lets PyYAML's ValueError (month 13) through: exit 70",
        ["flops", "x.yaml"],
        {"x.yaml": b"family: vit\ndefault_size: 2026-13-45\n"},
    ),
    FoundBug(
        "set-yaml-bad-date",
        "harness/recipes.py: parse_override lets PyYAML's ValueError (month 13) and RecursionError (deep "
        "nesting) through: exit 70",
        ["run", "vit", "--backend=maxtext", "--set=description=2026-13-45"],
    ),
    FoundBug(
        "manifest-yaml-deep",
        "containers/diff.py: read_manifest_source lets PyYAML's RecursionError through: exit 70",
        ["manifest", "diff", "x.yaml", "x.yaml"],
        {"x.yaml": b"components: " + DEEP_YAML},
    ),
    FoundBug(
        "manifest-markup-name",
        "containers/manifest_commands.py: manifest_diff_command renders component names as rich markup: "
        "exit 70",
        ["manifest", "diff", "a.yaml", "b.yaml"],
        {
            "a.yaml": MANIFEST.format(name="'[/oops]'", commit="a" * 40).encode(),
            "b.yaml": MANIFEST.format(name="'[/oops]'", commit="b" * 40).encode(),
        },
        refused=False,
    ),
    FoundBug(
        "manifest-number-commit",
        "containers/diff.py: manifest_pins takes any commit; containers/manifest_commands.py: _short slices "
        "it (exit 70)",
        ["manifest", "diff", "a.yaml", "b.yaml"],
        {
            "a.yaml": MANIFEST.format(name="jax", commit="a" * 40).encode(),
            "b.yaml": MANIFEST.format(name="jax", commit="1.5").encode(),
        },
    ),
    FoundBug(
        "sqlite-url-with-host",
        "results/store.py: connect lets create_engine's ArgumentError (sqlite://NAME) through: exit 70",
        ["report"],
        environ={store.DB_ENV: "sqlite://store.sqlite"},
    ),
    FoundBug(
        "url-port-not-a-number",
        "results/store.py: _parse lets make_url's ValueError (a port that is no number) through: exit 70",
        ["report"],
        environ={store.DB_ENV: "postgresql+psycopg://127.0.0.1:port/db"},
    ),
    FoundBug(
        "refused-url-makes-folders",
        "results/store.py: _engine makes the SQLite file's folders before the file is opened (or the driver "
        "found): exit 1, but new/sub/ is left behind",
        ["report"],
        environ={store.DB_ENV: "sqlite:///new/sub/.."},
    ),
    FoundBug(
        "url-query-warning",
        "results/store.py: a query argument the driver ignores (?mode=ro) makes SQLAlchemy print two "
        "SAWarnings of two lines each above the refusal",
        ["report"],
        environ={store.DB_ENV: "sqlite:///.?mode=ro"},
    ),
    FoundBug(
        "two-dashes",
        "Python 3.12.1's argparse gives `--set=--` as [] (fixed in later Pythons); harness/recipes.py: "
        "parse_override takes it for a string: exit 70 (and `ingest --night=--`: core/dates.py)",
        ["run", "vit", "--backend=maxtext", "--set=--"],
    ),
    FoundBug(
        "two-dashes-positional",
        "Python 3.12.1's argparse gives a second '--' as []; harness/commands.py: flags_diff escaped it as "
        "a profile name: exit 70",
        ["flags", "diff", "--", "--", "--"],
    ),
    FoundBug(
        "two-dashes-night",
        "Python 3.12.1's argparse gives `--night=--` as []; core/dates.py: parse_date matched it: exit 70",
        ["ingest", "x.json", "--night=--"],
        {"x.json": RESULT.encode()},
    ),
    FoundBug(
        "night-centuries-away",
        "results/store.py: _record_gaps wrote a gap row for every night between a series' last night and "
        "9999-12-31 (2.9 million rows, minutes and gigabytes)",
        ["ingest", "x.json", "--night=9999-12-31"],
        {"x.json": RESULT.encode()},
    ),
    FoundBug(
        "profile-path",
        "harness/flags/profiles.py: load_profile read `../NAME.yaml`, outside the profiles folder",
        ["flags", "show", "../llama2"],
    ),
    FoundBug(
        "multi-line-yaml-error",
        "harness/recipes.py: load_recipe_file quotes PyYAML's message, which takes two lines or more",
        ["flops", "x.yaml"],
        {"x.yaml": b"family: [vit\n"},
    ),
    FoundBug(
        "multi-line-validation",
        "harness/recipes.py: _describe gives one line per problem (here two: str or tuple)",
        ["run", "vit", "--backend=maxtext", "--set=parallelism.rules.embed=1"],
    ),
    FoundBug(
        "multi-line-manifest-yaml",
        "containers/diff.py: read_manifest_source quotes PyYAML's message, which takes two lines or more",
        ["manifest", "diff", "x.yaml", "x.yaml"],
        {"x.yaml": b"components: [\n"},
    ),
    FoundBug(
        "multi-line-unknown-flags",
        "harness/flags/check.py: check_or_drop lists unknown flags one a line",
        ["flags", "check", "--", "--xla_no_such_flag=1"],
    ),
    FoundBug(
        "multi-line-echo",
        "core/dates.py: parse_date repeats the --night value as given, line break included",
        ["ingest", "x.json", "--night=a\nb"],
        {"x.json": RESULT.encode()},
    ),
    FoundBug(
        "multi-line-key",
        "core/schema.py: first_problem names a field as given, line break included",
        ["ingest", "x.json"],
        {"x.json": RESULT.replace("{", '{"a\\nb": 1, ', 1).encode()},
    ),
]


@pytest.mark.parametrize("bug", [pytest.param(bug, id=bug.name) for bug in FOUND_BUGS])
def test_found_bug_stays_fixed(bug: FoundBug, sandbox: Sandbox) -> None:
    """Each bug the fuzzing found, on its smallest input, now keeps the contract (and is refused, where
    `refused`)."""
    for name, data in bug.files.items():
        sandbox.write(name, data)
    check(sandbox, Command(bug.argv, environ=bug.environ, never_succeeds=bug.refused))
