"""The bugs the fuzzing of the inputs (tests/jaxbench/test_fuzz.py) found, each as its smallest input, kept so
that each stays fixed: every one keeps the contract (tests/jaxbench/fuzz_contract.py) and is refused where it
was refused.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q -p no:cacheprovider tests/jaxbench/test_fuzz_found_bugs.py
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from jaxbench.results import store, synthetic
from tests.jaxbench.fuzz_contract import Command, Sandbox, check
from tests.support import fuzz_inputs as inputs
from tests.support import fuzz_mutations as mutations

# A failure report quotes its input, and these inputs are large on purpose (20,000 brackets).
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


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


DEEP_JSON = b"[" * mutations.DEEP + b"]" * mutations.DEEP
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
