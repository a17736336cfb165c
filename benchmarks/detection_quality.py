"""How well regression detection finds what was injected into synthetic nightly series, class by class, with
apache-otava's change points on the same series as a baseline.

Two views: retrospective (the whole series: recall, precision, F1, false findings, delay, transients found
"as one") and nightly (the job replayed night by night: true, repeated and false alarms, recall by the
third night). Prints PASS/FAIL against the targets. apache-otava pins numpy 2.2, so it runs in its own
virtualenv through benchmarks/otava_driver.py. The scoring rules and targets: docs/design.md, "How
detection quality is scored"; run times: docs/measurements.md.

    .venv/bin/python benchmarks/detection_quality.py --otava /tmp/otava-venv/bin/python
    .venv/bin/python benchmarks/detection_quality.py --quick [--markdown]      # the README tables
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

# Sibling modules: benchmarks/ is no package, but a script's own folder is on sys.path.
from detection_quality_scoring import (
    AS_ONE_NIGHTS,
    ATTRIBUTION,
    CP_TOLERANCE,
    REPLAY_NIGHTS,
    Nightly,
    Retrospective,
    by_class,
    judge_ours,
    replayed,
    score_retrospective,
)
from detection_quality_series import LONGEST, SHORTEST, Series, make_all
from detection_quality_tables import nightly_table, retrospective_table, targets

from jaxbench.results.detection import DEFAULT_SETTINGS

OTAVA_SETTINGS = {"window_len": 50, "max_pvalue": 1e-5, "min_magnitude": 0.01}
"""Otava's compute_change_points with our retrospective pass's settings (ChangePointSettings), so that the
two differ in method only; its defaults (max_pvalue 1e-3, min_magnitude 0) find spurious change points in
pure noise."""


def start_otava(python: str, series: list[Series], folder: Path) -> subprocess.Popen[str]:
    """Otava's driver on every series, in the background (it runs while our detection does)."""
    job = {
        **OTAVA_SETTINGS,
        "tolerance": CP_TOLERANCE,
        "series": [
            {"values": s.values.tolist(), "changes": s.changes, "stop": replayed(s).stop} for s in series
        ],
    }
    path = folder / "otava-job.json"
    path.write_text(json.dumps(job))
    driver = Path(__file__).with_name("otava_driver.py")
    return subprocess.Popen([python, str(driver), str(path)], stdout=subprocess.PIPE, text=True)


def judge_otava(process: subprocess.Popen[str], series: list[Series]) -> tuple[list[Retrospective], float]:
    out, _ = process.communicate()
    if process.returncode:
        raise SystemExit(f"the otava driver failed (exit {process.returncode})")
    result = json.loads(out)
    tallies = []
    for s, cps, reported in zip(series, result["change_points"], result["reported"], strict=True):
        nights = {
            change: night for change, night in zip(s.changes, reported, strict=True) if night is not None
        }
        tallies.append(score_retrospective(s, cps, (), nights))
    return tallies, float(result["seconds"])


def report(
    nightly: dict[str, Nightly],
    ours: dict[str, Retrospective],
    otava: dict[str, Retrospective] | None,
    markdown: bool,
) -> None:
    def title(text: str) -> None:
        print(f"\n**{text}**\n" if markdown else f"\n{text}")

    if otava is None:
        otava_note = (
            "apache-otava not run (--otava PYTHON, an interpreter with apache-otava): its columns left out"
        )
    else:
        otava_note = "otava: compute_change_points with " + ", ".join(
            f"{k} {v}" for k, v in OTAVA_SETTINGS.items()
        )
    title(
        "Retrospective pass on whole series, ours (change points and spans) and apache-otava's (change "
        "points). P precision, R recall, FA/100 false findings per 100 series-nights, delay p50 / p90 in "
        f"nights (first reported, run nightly), as one: transients of {AS_ONE_NIGHTS}+ nights found as one "
        f"transient. {otava_note}."
    )
    print(retrospective_table(ours, otava, markdown))
    title(
        f"Nightly replay (ours), {REPLAY_NIGHTS} nights per series. FA/100 and repeat/100: false and repeat "
        "alarms per 100 judged series-nights; P precision; R recall within "
        f"{ATTRIBUTION} nights, R 3 nights: by the third bad night; delay p50 / p90 in nights; too noisy: "
        "share of nights judged too noisy."
    )
    print(nightly_table(nightly, markdown))
    title("Targets")
    for line in targets(nightly, ours, otava):
        print(f"- {line}" if markdown else line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=200, help="series per class (default 200)")
    parser.add_argument("--quick", action="store_true", help="40 series per class: a look in about 30 s")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--otava", metavar="PYTHON", help="interpreter of a virtualenv with apache-otava")
    parser.add_argument("--markdown", action="store_true", help="tables in GitHub Markdown (for the docs)")
    args = parser.parse_args()
    per_class = 40 if args.quick else args.series
    if per_class < 1:
        parser.error("--series must be at least 1")
    if args.otava and not shutil.which(args.otava):
        parser.error(f"--otava {args.otava}: no such interpreter")
    begin = time.perf_counter()
    series = make_all(per_class, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        otava_run = start_otava(args.otava, series, Path(folder)) if args.otava else None
        with multiprocessing.Pool(args.workers) as pool:
            judged = pool.map(judge_ours, series, chunksize=4)
        otava = judge_otava(otava_run, series) if otava_run is not None else None
    nightly = by_class(series, [n for n, _ in judged], Nightly)
    ours = by_class(series, [r for _, r in judged], Retrospective)
    if not args.markdown:
        print(DEFAULT_SETTINGS)
    print(
        f"\n{len(series)} series ({per_class} per class) of {SHORTEST}-{LONGEST} nights, seed {args.seed}"
        + (f"; otava took {otava[1]:.0f} s" if otava is not None else "")
    )
    report(
        nightly, ours, by_class(series, otava[0], Retrospective) if otava is not None else None, args.markdown
    )
    print(f"\n({time.perf_counter() - begin:.0f} s)")


if __name__ == "__main__":
    main()
