"""Subcommands as one pattern: a Subcommand runs or holds subcommands of its own, the `jaxbench` parser is
built and dispatched from them at any depth, every package registers its own (triage included), and
`jaxbench --help` is the only list of them.

    JAX_PLATFORMS=cpu python -m pytest -q tests/jaxbench/test_subcommands.py
"""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Iterator

import pytest
from rich.console import Console

from jaxbench.core.cli import Subcommand, add_subcommands, handler_of
from jaxbench.main import build_parser, subcommands
from jaxbench.nightly import cli as nightly_cli
from jaxbench.triage import cli as triage_cli
from tests.conftest import REPO


def _handler(label: str, calls: list[str]) -> object:
    def run(args: argparse.Namespace, console: Console) -> int:
        calls.append(label)
        return 0

    return run


def _parser(commands: list[Subcommand]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tool", exit_on_error=False)
    add_subcommands(parser, commands)
    return parser


def test_a_group_dispatches_to_its_leaves_at_any_depth() -> None:
    calls: list[str] = []
    leaf = Subcommand("c", "c", run=_handler("a b c", calls))  # type: ignore[arg-type]
    tree = [
        Subcommand("a", "a", subcommands=(Subcommand("b", "b", subcommands=(leaf,)),)),
        Subcommand("d", "d", run=_handler("d", calls)),  # type: ignore[arg-type]
    ]
    parser = _parser(tree)
    for argv in (["a", "b", "c"], ["d"]):
        args = parser.parse_args(argv)
        assert handler_of(args)(args, Console()) == 0
    assert calls == ["a b c", "d"]


def test_a_group_needs_one_of_its_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    group = Subcommand("a", "a", subcommands=(Subcommand("b", "b", run=lambda args, console: 0),))
    with pytest.raises(SystemExit) as stop:
        _parser([group]).parse_args(["a"])
    assert stop.value.code == 2
    assert "tool a: error: the following arguments are required: COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize(
    "make",
    [
        lambda: Subcommand("a", "a"),  # neither runs nor holds any
        lambda: Subcommand("a", "a", run=lambda args, console: 0, subcommands=(Subcommand("b", "b"),)),
    ],
)
def test_a_subcommand_either_runs_or_holds_subcommands(make: object) -> None:
    with pytest.raises(AssertionError, match="either `run` or `subcommands`"):
        make()  # type: ignore[operator]


def test_two_subcommands_of_one_name_are_a_bug() -> None:
    twice = [Subcommand("a", "a", run=lambda args, console: 0)] * 2
    with pytest.raises(AssertionError, match="two subcommands have the same name"):
        _parser(twice)


def _leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subs = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subs:
        yield words, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, (*words, name))


def test_every_leaf_of_jaxbench_dispatches_to_a_handler() -> None:
    """The groups (nightly, flags, manifest, runs) are Subcommands too: no package dispatches by itself."""
    parser = build_parser(subcommands())
    leaves = dict(_leaves(parser))
    assert {("nightly", "plan"), ("nightly", "triage"), ("flags", "diff"), ("manifest", "record")} <= set(
        leaves
    )
    assert {("runs", "list"), ("runs", "delete"), ("triage",), ("smoke",)} <= set(leaves)
    for words, leaf in leaves.items():
        assert [value for value in leaf._defaults.values() if callable(value)], words
    args = parser.parse_args(["nightly", "store-pull", "--repo", "o/n", "--out", "x"])
    assert handler_of(args).__name__ == "_store_pull"
    for path in REPO.glob("*/cli.py"):
        assert "add_subparsers" not in path.read_text() or path.parent.name == "core", path


def test_triage_registers_its_own_subcommand() -> None:
    assert [command.name for command in nightly_cli.subcommands()] == ["nightly"]
    assert [command.name for command in triage_cli.subcommands(lambda repo, folder: None)] == ["triage"]
    assert [command.name for command in subcommands()].count("triage") == 1


def test_jaxbench_help_is_the_only_list_of_subcommands() -> None:
    """No module docstring of the command's composition lists subcommands (they drifted: six were missing);
    the README's command block names every subcommand, and nothing else."""
    names = [command.name for command in subcommands()]
    listing = re.compile(r"jaxbench [\w-]+(?: [\w-]+)? \| [\w-]+")
    for module in ["jaxbench.main", *(f"jaxbench.{p.parent.name}.cli" for p in REPO.glob("*/cli.py"))]:
        doc = importlib.import_module(module).__doc__ or ""
        assert not listing.search(doc), f"{module}'s docstring lists subcommands: {listing.search(doc)}"
    readme = (REPO / "README.md").read_text()
    block = readme.split("The `jaxbench` command (also `python -m jaxbench`):", 1)[1].split("```", 2)[1]
    lines = [line.split("#")[0] for line in block.splitlines() if line.startswith("jaxbench ")]
    first_words = {line.split()[1] for line in lines}
    assert first_words <= set(names)
    mentioned = {word for line in lines for word in re.findall(r"(?:^jaxbench|\|) ([\w-]+)", line)}
    assert set(names) <= mentioned, set(names) - mentioned


def test_version_names_jaxbench_and_the_installed_stack(capsys: pytest.CaptureFixture[str]) -> None:
    """From the distributions' metadata: the versions a run here would record in its provenance."""
    import importlib.metadata

    from jaxbench.main import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    first, stack = capsys.readouterr().out.splitlines()
    assert first.startswith(f"jaxbench {importlib.metadata.version('jaxbench')} (Python 3.")
    assert f"jax {importlib.metadata.version('jax')}," in stack
    assert f"optax {importlib.metadata.version('optax')}," in stack
    assert "transformer-engine " in stack
