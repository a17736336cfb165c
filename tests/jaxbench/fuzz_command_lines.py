"""Command lines for the fuzzing of every subcommand (tests/jaxbench/test_fuzz_commands.py), drawn from each
leaf subcommand's own argparse parser: each argument from a pool of valid, plausible and hostile values
chosen by its name or type (tests/support/fuzz_mutations.py's hostile text mixed in), the options that
would name this checkout always given.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from jaxbench.main import build_parser, subcommands
from tests.support import fuzz_mutations as mutations

VALID_RESULT, VALID_BENCHMARK, FOLDER, FIFO, LINK = "result.json", "bench.json", "folder", "pipe.json", "link"
UNDER_A_FILE = f"{VALID_RESULT}/sub"
"""An output path no command can write: a folder below a regular file."""
OUTPUT_DESTS = frozenset({"out", "work", "dir", "badges", "checkout", "github_output", "records"})
"""Arguments that name where a command writes."""

ALWAYS_GIVEN: dict[tuple[str, ...], tuple[str, ...]] = {
    ("venv",): ("dir",),
    ("manifest", "bump"): ("manifest",),
    ("nightly", "land"): ("checkout", "manifest"),
}
"""Options whose default names this checkout (its .venv-<flavor>, containers/manifest.yaml, the repository
itself): always given, from the sandbox's pools, so that no drawn command changes the checkout that runs
the tests (a `venv --flavor=maxtext` once replaced the checkout's own .venv-maxtext)."""

NASTY = mutations.arguments(mutations.choice(mutations.NASTY_STRINGS))
INTEGERS = st.integers(min_value=-3, max_value=2**70).map(str) | mutations.choice(
    ("0", "1", "2", "²", "١", "1e3", "0x10", "+7", " 7", "")
)
FLOATS = mutations.choice(("0.05", "0", "-1", "1e309", "nan", "inf", "-0.0", "0.5", "x"))
PATHS = mutations.choice((VALID_RESULT, VALID_BENCHMARK, FOLDER, FIFO, LINK, "missing/deep/x", "/", ".."))
OUTPUTS = mutations.choice(("out", "out/new", UNDER_A_FILE, FOLDER, LINK, "..", "/proc/x", "\u202eout"))
IDS = mutations.choice(
    ("1", "2", "0", "-1", "99999999999999999999999", "²", "١", "%%%%%%", "______", "abcdef", VALID_RESULT)
)
RECIPES = mutations.choice(
    ("llama2", "gpt3", "vit", "LLAMA2", "llama2\u200b", "llаma2", "recipe.yaml", "nope")
)
SIZES = mutations.choice(("tiny", "1b", "7B", "b16", "huge"))
SOURCES = mutations.choice(
    (
        "optax=fd::3#main",
        "optax=ext::sh -c touch% /tmp/x#main",
        "optax=https://oauth2:TOKEN@github.com/google-deepmind/optax#main",
        "optax=https://github.com/google-deepmind/optax#--upload-pack=x",
        "optax=-oProxyCommand=x#main",
        "optax=/no/such/repository#main",
        "nosuch=https://github.com/a/b#main",
        "optax",
    )
)
REVISIONS = mutations.choice(("HEAD", "main", "HEAD~1", "--upload-pack=x", "-x", "a" * 40, "v0.2.8"))
OVERRIDES = mutations.choice(
    (
        "train.steps=3",
        "train.steps=abc",
        "train.seed=12345678901234567890123456",
        "optimizer.learning_rate=.inf",
        "optimizer.learning_rate=.nan",
        "xla_flags=bogus",
        "train.global_bach=4",
        "a: &a [*a]",
        "x=[&a [1], *a, *a]",
    )
)
CLUSTER_VALUES = mutations.choice(
    ("gpu", "a b", "x\ny", 'a"b', "00:10:00", "99999999999999999999", "-1", "1")
)
IMAGES = mutations.choice(("ghcr.io/jaxbench/jax:cpu-2026-11-22", "a b", "x\ny", "UPPER/x", "", "@sha256:x"))
DATES = mutations.choice(("2026-11-02", "2026-02-30", "tonight", "9999-12-31"))
REPOS = mutations.choice(("owner/name", "../x", "a/b/c", "owner/name\n"))
URLS = mutations.choice(("https://example.invalid/x", "javascript:alert(1)", "http://user:pw@h/x", "x"))

BY_DEST: dict[str, st.SearchStrategy[str]] = {
    "recipe": RECIPES,
    "recipes": mutations.choice(
        ("llama2:tiny", "vit:b16", "llama2", "recipe.yaml:tiny", ":", "llama2:tiny:x")
    ),
    "trains": mutations.choice(("native", "maxtext", "levanter", "pax", "NATIVE")),
    "size": SIZES,
    "incident": IDS,
    "incidents": IDS,
    "a": IDS | mutations.choice(("base", "hopper", "--xla_gpu_enable_triton_gemm=false")),
    "b": IDS | mutations.choice(("base", "hopper")),
    "source": SOURCES,
    "base": REVISIONS,
    "head": REVISIONS,
    "set": OVERRIDES,
    "image": IMAGES,
    "base_image": IMAGES,
    "partition": CLUSTER_VALUES,
    "account": CLUSTER_VALUES,
    "time": CLUSTER_VALUES,
    "namespace": CLUSTER_VALUES,
    "date": DATES,
    "night": DATES,
    "created": DATES,
    "repo": REPOS,
    "dashboard_url": URLS,
    "ci_job_url": URLS,
    "pip_index_url": URLS,
    "pip_extra_index_url": URLS,
    "remote": URLS | REPOS,
    "cpus": mutations.choice(("0", "1", "0,1", "99", "²", "0-1", "", "a")),
    "threshold": FLOATS,
    "profile": INTEGERS,
    "flavor": mutations.choice(("cpu", "jax", "maxtext", "pax", "t5x", "nope", "../x")),
    "flavors": mutations.choice(("cpu", "jax,maxtext", "", "nope")),
    "note": NASTY,
    "author": NASTY,
}


def values(action: argparse.Action) -> st.SearchStrategy[str]:
    """What one argument is given: the pool for its name, else by its type, with hostile text mixed in."""
    if action.choices and not isinstance(action.choices, dict):
        # Mostly a valid choice: argparse refuses any other itself.
        choices = mutations.choice([str(c) for c in action.choices])
        return st.one_of(choices, choices, choices, NASTY)
    if action.dest in BY_DEST:
        pool: st.SearchStrategy[str] = BY_DEST[action.dest]
    elif action.dest in OUTPUT_DESTS:
        pool = OUTPUTS
    elif action.type is Path or action.dest in ("files", "csv", "manifest", "plan", "stages", "result"):
        pool = PATHS
    elif action.type is float:
        pool = FLOATS
    elif action.type is not None and action.type is not str:
        pool = INTEGERS
    else:
        pool = mutations.choice(("x", "1", "llama2", VALID_RESULT))
    return st.one_of(pool, pool, NASTY)


@st.composite
def command_lines(draw: st.DrawFn, words: tuple[str, ...], parser: argparse.ArgumentParser) -> list[str]:
    """The subcommand `words`, then each optional argument or not, then the positional ones."""
    argv = list(words)
    positional: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if "--debug" in action.option_strings:
            continue  # prints a traceback by design (tests/jaxbench/test_errors.py); the contract refuses one
        if not action.option_strings:
            count = {None: 1, "?": draw(st.integers(0, 1)), "*": draw(st.integers(0, 2))}.get(
                action.nargs, draw(st.integers(1, 2))
            )
            positional += [draw(values(action)) for _ in range(count)]
            continue
        if not (action.required or action.dest in ALWAYS_GIVEN.get(words, ()) or draw(st.booleans())):
            continue
        flag = action.option_strings[-1]
        if action.nargs == 0:
            argv.append(flag)
        elif action.nargs in ("+", "*"):
            argv += [flag, *(draw(values(action)) for _ in range(draw(st.integers(1, 2))))]
        else:
            argv.append(f"{flag}={draw(values(action))}")
    # '--' keeps a positional value such as '-h' a value.
    return argv + (["--", *positional] if positional else [])


def leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf subcommand (`nightly land`, `run`) with its parser."""
    subs = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subs:
        yield words, parser
        return
    for name, sub in subs[0].choices.items():
        yield from leaves(sub, (*words, name))


LEAVES = dict(leaves(build_parser(subcommands())))
