"""The `jaxbench` command's one top-level handler: an expected failure (a file, text that is not UTF-8, git or
docker, the network, a folder a report must not replace) is one line and its exit code; --debug and
JAXBENCH_DEBUG=1 add its traceback; a bug always shows its traceback and exits 70."""

from __future__ import annotations

import subprocess
import tracemalloc
from pathlib import Path

import pytest

from jaxbench import main as cli
from jaxbench.core.errors import (
    ONE_LINE_LIMIT,
    ExitCode,
    ExternalFailure,
    InvalidInput,
    JaxbenchError,
    expected_failure,
)
from jaxbench.core.errors import one_line as one_line_of
from jaxbench.core.files import read_text
from jaxbench.results import commands

NOT_UTF8 = b"value\n1\n\xff2\n"
"""A CSV whose third line starts with a byte that UTF-8 never starts a character with, at offset 8."""


@pytest.mark.parametrize(
    ("error", "failure", "message"),
    [
        (FileNotFoundError(2, "No such file or directory", "a.csv"), InvalidInput, "a.csv: No such file"),
        (IsADirectoryError(21, "Is a directory", "runs"), InvalidInput, "runs: Is a directory; expected a"),
        (
            UnicodeDecodeError("utf-8", b"ab\xffc", 2, 3, "invalid start byte"),
            InvalidInput,
            "not UTF-8 text: byte 0xff at byte offset 2 (invalid start byte)",
        ),
        (
            subprocess.CalledProcessError(1, ["docker", "push", "x:1"], stderr="pushing\ndenied: no access"),
            ExternalFailure,
            "docker push x:1 exited with status 1: denied: no access",
        ),
        (subprocess.TimeoutExpired(["git", "ls-remote"], 300), ExternalFailure, "git ls-remote: no answer"),
        (ConnectionRefusedError(111, "Connection refused"), ExternalFailure, "the network failed"),
    ],
    ids=["missing", "folder", "not-utf8", "docker", "git-hangs", "network"],
)
def test_expected_failures_of_the_standard_library(
    error: Exception, failure: type[JaxbenchError], message: str
) -> None:
    described = expected_failure(error)
    assert isinstance(described, failure) and message in str(described)


def test_bugs_are_no_expected_failure() -> None:
    assert expected_failure(KeyError("series")) is None
    assert expected_failure(OSError("no file named")) is None


def test_read_text_names_the_file_and_the_offset_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "series.csv"
    path.write_bytes(b"\xef\xbb\xbf" + NOT_UTF8)  # offsets count the byte-order mark too
    with pytest.raises(InvalidInput, match=rf"^{path}: not UTF-8 text: byte 0xff at byte offset 11 "):
        read_text(path)
    path.write_bytes(b"\xef\xbb\xbfvalue\r\n1\r\n")
    assert read_text(path) == "value\r\n1\r\n"
    with pytest.raises(InvalidInput, match=rf"^{tmp_path / 'missing.csv'}: No such file or directory$"):
        read_text(tmp_path / "missing.csv")


def one_line(error: str) -> str:
    assert "Traceback" not in error
    [line] = error.strip().splitlines()
    return line


def test_unreadable_inputs_are_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "series.csv"
    csv.write_bytes(NOT_UTF8)
    run = tmp_path / "result.json"
    run.write_bytes(b'{"run_id": "\xfe"}')
    recipe = tmp_path / "llama2.yaml"
    recipe.write_bytes(b"family: llama2\nsizes:\n  tiny: {note: caf\xe9}\n")  # Latin-1, not UTF-8
    manifest = tmp_path / "manifest.yaml"
    manifest.write_bytes(b"components: {}\n# \xff\n")
    expected = {
        ("run", str(recipe), "--no-ingest", "--out", str(tmp_path / "out")): (
            f"error: {recipe}: not UTF-8 text: byte 0xe9 at byte offset 40 "
        ),
        ("manifest", "diff", str(manifest), str(manifest)): (
            f"error: {manifest}: not UTF-8 text: byte 0xff at byte offset 17 "
        ),
        ("detect-series", str(csv)): f"error: {csv}: not UTF-8 text: byte 0xff at byte offset 8 ",
        ("detect-series", str(tmp_path)): f"error: {tmp_path}: a folder; expected a regular file",
        ("compare", str(run), str(run)): f"error: {run}: not UTF-8 text: byte 0xfe at byte offset 12 ",
    }
    for argv, message in expected.items():
        assert cli.main(list(argv)) == ExitCode.INVALID_INPUT, argv
        assert one_line(capsys.readouterr().err).startswith(message)


@pytest.mark.parametrize(
    ("before", "after", "environ"),
    [(["--debug"], [], {}), ([], ["--debug"], {}), ([], [], {"JAXBENCH_DEBUG": "1"})],
    ids=["before the subcommand", "after it", "environment"],
)
def test_debug_shows_the_traceback_and_keeps_the_exit_code(
    before: list[str],
    after: list[str],
    environ: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert cli.main([*before, "detect-series", str(tmp_path), *after]) == ExitCode.INVALID_INPUT
    error = capsys.readouterr().err
    assert "Traceback" in error and "InvalidInput" in error
    assert error.strip().splitlines()[-1] == f"error: {tmp_path}: a folder; expected a regular file"


@pytest.mark.parametrize(("value", "debug"), [("1", True), ("True", True), ("0", False), ("", False)])
def test_which_jaxbench_debug_values_show_tracebacks(value: str, debug: bool) -> None:
    assert cli.debug_requested(False, {cli.DEBUG_ENV: value}) is debug


def test_a_bug_shows_its_traceback_and_exits_internal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(path: Path, console: object, as_json: bool) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr(commands, "print_series_change_points", broken)
    assert cli.main(["detect-series", str(tmp_path / "series.csv")]) == ExitCode.INTERNAL
    error = capsys.readouterr().err
    assert "Traceback" in error and "KeyError: 'a bug'" in error
    assert error.strip().splitlines()[-1].startswith("internal error: a bug in jaxbench")


def test_report_refuses_folders_it_must_not_write_into(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    file = tmp_path / "notes.txt"
    file.write_text("precious")
    html = ("--format", "html", "--out")
    refusals = {
        (*html, str(home)): f"error: --out {home} exists and is not a jaxbench dashboard",
        (*html, str(file)): f"error: --out {file} is a file; expected a folder",
        ("--format", "json", "--badges", str(file)): f"error: --badges {file} is a file; expected a folder",
    }
    for argv, message in refusals.items():
        assert cli.main(["report", *argv]) == ExitCode.INVALID_INPUT, argv
        assert one_line(capsys.readouterr().err).startswith(message)
    assert (home / "thesis.tex").read_text() == "precious" and file.read_text() == "precious"


def test_ctrl_c_outside_a_run_is_one_line_and_exit_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(path: Path, console: object, as_json: bool) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "print_series_change_points", interrupted)
    assert cli.main(["detect-series", str(tmp_path / "series.csv")]) == ExitCode.INTERRUPTED
    assert one_line(capsys.readouterr().err) == "interrupted"


def test_one_line_is_bounded_and_costs_no_copy_of_a_huge_message() -> None:
    """A message quoting a value of 10**8 elements made the handler itself raise MemoryError: one_line split
    the whole text into words before joining them. Now it reads words one at a time and stops at the
    limit; its memory does not grow with the text (a 20 MB message, 10**7 words)."""
    huge = "x, " * 10**7
    tracemalloc.start()
    try:
        line = one_line_of(huge)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(line) == ONE_LINE_LIMIT and line.endswith("…") and line.startswith("x, x, ")
    assert peak < 100_000
    assert one_line_of("y" * 10**6) == "y" * (ONE_LINE_LIMIT - 1) + "…"  # one word longer than the limit
    assert one_line_of("  a\n\tb  ") == "a b"  # short messages are as they were


def test_a_yaml_bomb_in_a_set_value_or_a_recipe_is_refused_in_one_short_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At 10**5 elements the refusal was a 358 KB "line"; at 10**8 the handler raised MemoryError."""
    bomb = "&a [1,1,1,1,1,1,1,1,1,1]"
    for name in "bcdefgh":  # each level ten aliases of the one before: 10**8 elements
        bomb = f"[{bomb}, &{name} [{', '.join([f'*{chr(ord(name) - 1)}'] * 10)}]]"
    recipe = tmp_path / "bomb.yaml"
    recipe.write_text(f"family: llama2\ndefault_size: tiny\nsizes:\n  tiny: {{note: {bomb}}}\n")
    for argv in (["llama2", "--set", f"train.seed={bomb}"], [str(recipe)]):
        code = cli.main(["run", *argv, "--no-ingest", "--out", str(tmp_path / "out")])
        line = one_line(capsys.readouterr().err)
        assert code == ExitCode.INVALID_INPUT and len(line) <= len("error: ") + ONE_LINE_LIMIT
        assert 'its aliases expand it by more than 10,000 nodes (a "billion laughs")' in line
    assert not (tmp_path / "out").exists()


def test_an_unknown_option_gets_the_subcommands_usage_and_the_nearest_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Not the usage of every subcommand: `run`'s own, and the option meant."""
    with pytest.raises(SystemExit) as stopped:
        cli.main(["run", "llama2", "--sise", "tiny"])
    assert stopped.value.code == ExitCode.USAGE
    error = capsys.readouterr().err
    assert error.startswith("usage: jaxbench run ")
    assert error.strip().splitlines()[-1] == (
        "jaxbench run: error: unrecognized arguments: --sise (did you mean --size?) tiny"
    )
    with pytest.raises(SystemExit):
        cli.main(["nightly", "plan", "--flavours", "cpu"])
    assert "usage: jaxbench nightly plan " in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["reprot"], "jaxbench: error: argument COMMAND: invalid choice: 'reprot' (did you mean 'report'?;"),
        (
            ["nightly", "plna"],
            "jaxbench nightly: error: argument COMMAND: invalid choice: 'plna' (did you mean",
        ),
        (["run", "llama2", "--backend", "MaxText"], "invalid choice: 'MaxText' (did you mean 'maxtext'?;"),
        (["xyzzy"], "jaxbench: error: argument COMMAND: invalid choice: 'xyzzy' (choose from 'recipes',"),
    ],
    ids=["command", "nested-command", "choice-in-another-case", "nothing-close"],
)
def test_a_misspelt_command_or_choice_names_the_nearest(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == ExitCode.USAGE
    assert expected in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_misspelt_flag_profile_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["flags", "show", "hoper"]) == ExitCode.INVALID_INPUT
    assert "no XLA flag profile 'hoper' in" in (err := capsys.readouterr().err)
    assert "(did you mean 'hopper'?); expected one of" in err


def test_a_recipe_or_size_in_another_case_or_misspelt_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["flops", "llama"]) == ExitCode.INVALID_INPUT
    assert "no recipe named 'llama' (did you mean 'llama2'?)" in capsys.readouterr().err
    assert cli.main(["flops", "llama2", "--size", "7B"]) == ExitCode.INVALID_INPUT
    assert "no size '7B' (did you mean '7b'?)" in capsys.readouterr().err


def test_a_commands_help_keeps_its_paragraphs_and_example_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """pr-check's help used to run its two example commands into the paragraph above them."""
    with pytest.raises(SystemExit):
        cli.main(["pr-check", "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert "  jaxbench pr-check --base origin/main --head HEAD" in lines
    examples = lines.index("  jaxbench pr-check --base origin/main --head HEAD")
    assert lines[examples - 1] == "" and lines[examples + 1].startswith("  jaxbench pr-check --base v0.2.8")
