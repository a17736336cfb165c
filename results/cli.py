"""The results store's subcommands for the `jaxbench` command: their arguments, and the calls they become.

    jaxbench report --format markdown

The store is the one JAXBENCH_DB names (results/store.py). The commands import the store, its judgement and
its renderers only when they run, so `jaxbench --help` stays quick.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from jaxbench.core.cli import AddArguments, Handler, Subcommand, positive_number
from jaxbench.core.ids import parse_id
from jaxbench.core.json_output import add_json_option

HUMAN_VERDICTS = ("real", "infrastructure", "noise", "expected")
"""results.judgement.vocabulary.HumanVerdict's values (a test keeps them equal), here without importing
the judgement code."""


def _add_ingest(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, help="result files, or folders of them")
    parser.add_argument(
        "--allow-empty", action="store_true", help="a missing or empty folder is not an error"
    )
    parser.add_argument(
        "--night", help="the night these runs belong to, YYYY-MM-DD (default: from each file)"
    )
    parser.add_argument("--ci-job-url", help="link to the CI job that produced the files")
    add_json_option(parser)


def _ingest(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.results import commands

    options = commands.IngestOptions(
        tuple(args.files), args.night, args.ci_job_url, args.allow_empty, as_json=args.json
    )
    return commands.ingest_files(options, console)


def _detect(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.results import commands

    return commands.detect_regressions(console, as_json=args.json)


def _add_report(parser: argparse.ArgumentParser) -> None:
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--format",
        default="table",
        choices=["table", "markdown", "json", "html"],
        help="default: table; json is --json's document",
    )
    add_json_option(shown)
    parser.add_argument(
        "--out",
        type=Path,
        help="folder for the HTML dashboard (with --format html): new, empty, or a dashboard written before, "
        "which is replaced whole",
    )
    parser.add_argument("--badges", type=Path, help="also write shields.io endpoint badges to this folder")


def _report(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.results import commands

    return commands.show_report("json" if args.json else args.format, args.out, args.badges, console)


def _run_reference(text: str) -> str:
    """A result file as given, or a run id of the store as core.ids reads every id: any digits that are not
    a file ("²", "١", 25 of them) are an id, refused unless ASCII and within the store's range."""
    return str(parse_id(text, "run")) if text.isdigit() and not Path(text).exists() else text


def _add_hlo_diff(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="a result file (jaxbench run --out) or a run id of the store")
    parser.add_argument("b")
    add_json_option(parser)


def _hlo_diff(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.results import comparison_commands

    return comparison_commands.hlo_diff(_run_reference(args.a), _run_reference(args.b), args.json, console)


def _add_compare(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="a result file or a run id of the store")
    parser.add_argument("b")
    add_json_option(parser)


def _compare(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.results import comparison_commands

    a, b = _run_reference(args.a), _run_reference(args.b)
    return comparison_commands.compare_results(a, b, console, as_json=args.json)


def _add_detect_series(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("csv", type=Path, help="a `value` column, optionally `date`, rows in time order")
    add_json_option(parser)


def _detect_series(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.results import commands

    return commands.print_series_change_points(args.csv, console, as_json=args.json)


def _add_verdict(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("incident", help="the incident's id (jaxbench report)")
    parser.add_argument("decision", choices=HUMAN_VERDICTS)
    parser.add_argument("--author")
    parser.add_argument("--note")
    add_json_option(parser)


def _verdict(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.results import commands

    incident = parse_id(args.incident, "incident")
    return commands.record_human_verdict(
        incident, args.decision, args.author, args.note, console, as_json=args.json
    )


def _add_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("build/demo"),
        help="folder for the demo's results, store and dashboard (default: build/demo): new, empty, or a "
        "demo made before, which is replaced whole",
    )


def _demo(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.results import demo_commands

    return demo_commands.run_demo(args.out, console)


RUN_DECISIONS = ("quarantine", "release", "delete")
"""results.quarantine.Decision's values (a test keeps them equal), here without importing the store."""


def _add_runs_list(parser: argparse.ArgumentParser) -> None:
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--quarantined", action="store_true", help="only the runs out of the judgement")
    shown.add_argument("--deleted", action="store_true", help="the runs deleted, with who, when and why")
    parser.add_argument("--limit", type=positive_number, default=50, help="at most this many (default 50)")
    add_json_option(parser)


def _runs_list(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.results import run_commands

    return run_commands.list_runs(args.quarantined, args.deleted, args.limit, console, as_json=args.json)


def _add_decision(name: str) -> AddArguments:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "runs", nargs="+", metavar="RUN", help="run ids of the store (jaxbench runs list)"
        )
        parser.add_argument("--note", help="why (required to quarantine or delete)")
        parser.add_argument("--author", help="who decided (default: this user's login name)")
        if name == "delete":
            parser.add_argument("--yes", action="store_true", help="confirm: the rows are removed for good")
        add_json_option(parser)

    return add


def _decide(name: str) -> Handler:
    def decide(args: argparse.Namespace, console: Console) -> int:
        from jaxbench.results import run_commands
        from jaxbench.results.quarantine import Decision

        options = run_commands.DecisionOptions(
            tuple(parse_id(text, "run") for text in args.runs),
            Decision(name),
            args.note,
            args.author,
            getattr(args, "yes", False),
            as_json=args.json,
        )
        return run_commands.decide_on_runs(options, console)

    return decide


RUN_DECISION_HELP = {
    "quarantine": "leave runs out of every judgement (detect, report, dashboard); their rows stay",
    "release": "judge quarantined runs again",
    "delete": "remove runs and their results for good (needs --yes); a record of who, when, why stays",
}


def _runs() -> tuple[Subcommand, ...]:
    listed = Subcommand(
        "list", "the newest runs with their ids, quarantined ones marked", _add_runs_list, _runs_list
    )
    decisions = (
        Subcommand(name, RUN_DECISION_HELP[name], _add_decision(name), _decide(name))
        for name in RUN_DECISIONS
    )
    return (listed, *decisions)


def subcommands() -> list[Subcommand]:
    """In workflow order: add results, judge them, read the judgement, look closer, record a person's word
    on an incident or a run; and all of it on a made-up history."""
    return [
        Subcommand(
            "ingest",
            "add result files (jaxbench or pytest-benchmark JSON) to the store",
            _add_ingest,
            _ingest,
        ),
        Subcommand(
            "detect",
            "judge every series; exit 4 while a regression incident is open",
            add_json_option,
            _detect,
        ),
        Subcommand(
            "report", "series states and incidents: table, markdown, json or html", _add_report, _report
        ),
        Subcommand(
            "compare", "two runs (result files or store run ids), metric by metric", _add_compare, _compare
        ),
        Subcommand(
            "hlo-diff",
            "how two runs' compiled programs differ (result files or store run ids): the same program, or "
            "which ops, fusions, collectives and kernels changed, and XLA's cost estimate",
            _add_hlo_diff,
            _hlo_diff,
        ),
        Subcommand(
            "detect-series",
            "change points of one series in a CSV (a value column)",
            _add_detect_series,
            _detect_series,
        ),
        Subcommand("verdict", "record a person's judgement of an incident", _add_verdict, _verdict),
        Subcommand(
            "runs",
            "list runs; quarantine, release or delete one (who, when and why are kept)",
            subcommands=_runs(),
        ),
        Subcommand(
            "demo",
            "a made-up history of 75 nights with one of each finding, into its own store and dashboard "
            "(never JAXBENCH_DB's): what jaxbench shows, in seconds",
            _add_demo,
            _demo,
        ),
    ]
