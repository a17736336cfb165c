"""One output contract (core/json_output.py): every command that prints information takes `--json` and then
prints one JSON document on stdout, in one envelope. The parser is the registry: the test walks it and holds
each of its commands to INFORMATION (takes --json) or LEFT_OUT (with why), and docs/cli.md to both lists.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/jaxbench/test_json_output.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxbench.containers import docker, image_size, measure
from jaxbench.core.errors import ExitCode
from jaxbench.core.json_output import JSON_HELP, SCHEMA_VERSION, jaxbench_version
from jaxbench.main import build_parser, main, subcommands
from jaxbench.results import store, synthetic
from tests.conftest import REPO

INFORMATION = frozenset(
    {
        "recipes",
        "backends",
        "flops",
        "flags show",
        "flags check",
        "flags diff",
        "ingest",
        "detect",
        "report",
        "compare",
        "hlo-diff",
        "detect-series",
        "verdict",
        "runs list",
        "runs quarantine",
        "runs release",
        "runs delete",
        "manifest show",
        "manifest diff",
        "image-size",
    }
)
"""The commands that print information: each takes --json (and `jaxbench --version --json`)."""

WORK = "does work and prints its progress; what it measures goes to result files and the store"
LEFT_OUT = {
    "run": WORK,
    "ab": WORK,
    "microbench": WORK,
    "smoke": WORK,
    "gpu-check": WORK,
    "demo": "makes a store and a dashboard of its own, and prints where",
    "manifest bump": "changes the manifest; prints the moves it made",
    "manifest record": "writes the resolved manifest (JSON) to a file",
    "build": "builds images, printing progress; the build record is a JSON file",
    "overlay": "makes a virtualenv overlay and prints its path",
    "venv": "makes a virtualenv, printing progress",
    "push": "pushes an image, printing progress",
    "publish": "publishes images, printing progress",
    "nightly plan": "prints GitHub Actions outputs (key=value, values JSON), read by the workflow",
    "nightly alerts": "acts on the issue tracker and prints what it did",
    "nightly triage": "runs triages, printing progress",
    "nightly store-pull": "downloads the store",
    "nightly land": "lands the bumped manifest or opens a pull request",
    "triage": "reruns and bisects, printing progress; its summary is summary.json",
    "backfill": "installs and runs past releases, printing progress; its record is ledger.json",
    "pr-check": "runs both sides, printing progress; its verdict is OUT/pr-check.json",
}
"""The commands without --json, and why."""


def leaves(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command that runs ("flags show"), with its parser."""
    groups = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not groups:
        yield prefix.strip(), parser
    for group in groups:
        for name, sub in group.choices.items():
            yield from leaves(sub, f"{prefix} {name}")


def json_option(parser: argparse.ArgumentParser) -> argparse.Action | None:
    return next((action for action in parser._actions if "--json" in action.option_strings), None)


def test_every_information_command_takes_json_and_every_other_is_left_out_with_why() -> None:
    commands = dict(leaves(build_parser(subcommands())))
    assert INFORMATION.isdisjoint(LEFT_OUT) and set(commands) == INFORMATION | set(LEFT_OUT)
    for name in INFORMATION:
        option = json_option(commands[name])
        assert option is not None and option.help == JSON_HELP, name
    for name, why in LEFT_OUT.items():
        assert why and json_option(commands[name]) is None, f"{name} takes --json: move it to INFORMATION"


def test_the_docs_list_the_same_commands() -> None:
    text = (REPO / "docs" / "cli.md").read_text()
    with_json, _, left_out = text.partition("### Left out")
    named = re.compile(r"`jaxbench ([a-z][a-z -]*[a-z])`")
    assert set(named.findall(with_json.partition("### Commands with --json")[2])) == INFORMATION
    assert set(named.findall(left_out.partition("\n## ")[0])) == set(LEFT_OUT)


def printed(argv: list[str], capsys: pytest.CaptureFixture[str], code: int = ExitCode.OK) -> Any:
    """The command's data, after checking that stdout held its envelope alone, naming the command."""
    assert main(argv) == code, capsys.readouterr().err
    document = json.loads(capsys.readouterr().out)
    assert list(document) == ["schema_version", "command", "jaxbench", "data"]
    assert document["schema_version"] == SCHEMA_VERSION == 1
    assert document["jaxbench"] == jaxbench_version()
    named = "--version" if "--version" in argv else " ".join(argv[:2])
    assert document["command"] in (named, named.partition(" ")[0]) and (
        document["command"] in INFORMATION | {"--version"}
    )
    return document["data"]


def first_recipe(data: Any) -> None:
    assert {"recipe", "family", "size", "params"} <= set(data[0])


def native_backend(data: Any) -> None:
    assert next(view for view in data if view["name"] == "native")["framework"] is False


def tiny_llama(data: Any) -> None:
    assert data["recipe"] == "llama2-tiny" and data["unit"] == "token" and data["parameters"] > 0


def resolved_profile(data: Any) -> None:
    assert data["profile"] != "auto" and isinstance(data["xla"], dict) and "XLA_FLAGS" in data


def checked_against_jaxlib(data: Any) -> None:
    assert data["known_flags"] >= 0 and data["jaxlib"]


def no_differences(data: Any) -> None:
    assert data == {"a": "none", "b": "none", "differences": []}


def cpu_flavor(data: Any) -> None:
    assert data["flavor"] == "cpu" and data["stages"][0]["name"] == "base"


def same_pins(data: Any) -> None:
    assert data["components"] == [] and data["old"] == data["new"]


def the_stack(data: Any) -> None:
    assert data["python"] and "jax" in data["stack"]


CHEAP: list[tuple[list[str], Callable[[Any], None]]] = [
    (["recipes", "--json"], first_recipe),
    (["backends", "--json"], native_backend),
    (["flops", "llama2", "--size", "tiny", "--json"], tiny_llama),
    (["flags", "show", "--json"], resolved_profile),
    (["flags", "check", "--json"], checked_against_jaxlib),
    (["flags", "diff", "none", "none", "--json"], no_differences),
    (["manifest", "show", "cpu", "--json"], cpu_flavor),
    (["manifest", "diff", "containers/manifest.yaml", "containers/manifest.yaml", "--json"], same_pins),
    (["--version", "--json"], the_stack),
    (["--json", "--version"], the_stack),
]


@pytest.mark.parametrize(("argv", "check"), CHEAP, ids=[" ".join(argv) for argv, _ in CHEAP])
def test_a_listing_prints_its_envelope(
    argv: list[str],
    check: Callable[[Any], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(REPO)
    check(printed(argv, capsys))


def test_detect_series_prints_its_change_points(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "series.csv"
    path.write_text("value\n" + "".join(f"{100 if i < 30 else 120}.{i % 3}\n" for i in range(50)))
    data = printed(["detect-series", str(path), "--json"], capsys)
    assert data["points"] == 50 and [point["index"] for point in data["change_points"]] == [30]


START = dt.date(2026, 10, 1)


@pytest.fixture
def nights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """30 nights of one benchmark, 10% slower from night 24 on, and an empty store."""
    monkeypatch.setenv(store.DB_ENV, f"sqlite:///{tmp_path / 'store.sqlite'}")
    rng = random.Random(7)
    return [
        synthetic.write(
            tmp_path / "runs",
            synthetic.run_result(
                START + dt.timedelta(days=i), 0.5 * (1.1 if i >= 24 else 1) * rng.gauss(1, 0.005)
            ),
        )
        for i in range(30)
    ]


def test_the_store_commands_print_their_envelopes(
    nights: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    added = printed(["ingest", *map(str, nights), "--json"], capsys)["added"]
    assert [entry["path"] for entry in added] == list(map(str, nights))
    again = printed(["ingest", str(nights[0]), "--json"], capsys)
    assert (again["added"], again["skipped"], again["files"]) == ([], [str(nights[0])], 1)
    # The exit code is the command's, --json or not: 4 while an incident is open.
    judged = printed(["detect", "--json"], capsys, code=ExitCode.REGRESSION)
    [incident] = judged["open_incidents"]
    assert judged["series_judged"] > 0 and dt.date.fromisoformat(incident["night"]) >= START + dt.timedelta(
        24
    )
    report = printed(["report", "--json"], capsys)
    assert report["summary"]["open_incidents"] == 1 and report["incidents"][0]["id"] == incident["id"]
    assert printed(["report", "--format", "json"], capsys)["series"] == report["series"]
    recorded = printed(["verdict", str(incident["id"]), "noise", "--note", "a test", "--json"], capsys)
    assert (recorded["incident"], recorded["decision"], recorded["note"]) == (
        incident["id"],
        "noise",
        "a test",
    )
    runs = printed(["runs", "list", "--limit", "2", "--json"], capsys)["runs"]
    assert [run["night"] for run in runs] == [str(START + dt.timedelta(days=night)) for night in (29, 28)]
    decided = printed(["runs", "quarantine", str(runs[0]["run_id"]), "--note", "why", "--json"], capsys)
    assert decided["runs"] == [{"run_id": runs[0]["run_id"], "recorded": True}]


def test_compare_prints_the_metrics_of_two_result_files(
    nights: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data = printed(["compare", str(nights[0]), str(nights[-1]), "--json"], capsys)
    step = next(row for row in data["metrics"] if row["metric"] == "perf/step_time_s")
    assert data["a"] == "llama2-7b (native, nightly)" and step["ratio"] == pytest.approx(1.1, rel=0.03)


def test_image_size_prints_its_report_and_its_progress_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No Docker engine needed: the engine and the measurement are stand-ins."""
    monkeypatch.setattr(docker, "require_engine", lambda subject: "27.0")
    monkeypatch.setattr(docker, "image_exists", lambda reference: True)
    layers = [image_size.Size("RUN a", 1000, 300)]
    report = image_size.build_report("x:y", layers, {"jaxlib": {"bytes": 300, "compressed_bytes": 100}})
    monkeypatch.setattr(measure, "size_report", lambda image: report)
    assert main(["image-size", "x:y", "--json"]) == ExitCode.OK
    out, err = capsys.readouterr()
    assert json.loads(out)["data"]["total"] == {"name": "total", "bytes": 1000, "compressed_bytes": 300}
    assert "measuring x:y" in err
