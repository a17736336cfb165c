"""How long the nightly detection takes over a year of history for many series, and how its change points
compare with apache-otava's on the same series.

Times the retrospective pass and the screen of the newest nights over SERIES synthetic series of NIGHTS
nights, single-threaded, after a warm-up; the target is both passes over 1,000 series x 365 nights in
under 10 s on 2 cores. With --otava, a driver runs otava in its own virtualenv with our settings, and
change points within +-1 night agree. Details: docs/design.md, "Detection speed"; figures:
docs/measurements.md.

    .venv/bin/python benchmarks/detection_speed.py                                  # ours only
    .venv/bin/python benchmarks/detection_speed.py --otava /tmp/otava-venv/bin/python
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

from jaxbench.results.detection import DEFAULT_SETTINGS, retrospective, screen_latest, segment_start

SERIES = 1000
NIGHTS = 365
TOLERANCE = 1
SETTINGS = DEFAULT_SETTINGS.change_points

OTAVA_DRIVER = """
import json, sys, time
from otava.analysis import compute_change_points
job = json.load(open(sys.argv[1]))
found = []
start = time.perf_counter()
for series in job["series"]:
    cps, _ = compute_change_points(
        series, window_len=job["window_len"], max_pvalue=job["max_pvalue"], min_magnitude=job["min_magnitude"]
    )
    found.append([int(cp.index) for cp in cps])
print(json.dumps({"seconds": time.perf_counter() - start, "change_points": found}))
"""


@dataclasses.dataclass(frozen=True)
class Series:
    values: npt.NDArray[np.float64]
    steps: tuple[int, ...]


def make_series(rng: np.random.Generator) -> Series:
    """Noise of CV 0.5-3 %; with probability 0.7, 1-3 steps of 3-20 % up or down at least 40 nights apart."""
    level = np.ones(NIGHTS)
    steps: list[int] = []
    if rng.random() < 0.7:
        candidates = np.sort(
            rng.choice(np.arange(40, NIGHTS - 20, 40), size=int(rng.integers(1, 4)), replace=False)
        )
        for night in candidates + rng.integers(0, 20, candidates.size):
            level[night:] *= (1 + rng.uniform(0.03, 0.2)) ** rng.choice([-1, 1])
            steps.append(int(night))
    noise = rng.choice([0.005, 0.01, 0.02, 0.03])
    return Series(level * (1 + noise * rng.standard_normal(NIGHTS)), tuple(steps))


def time_ours(series: list[Series]) -> tuple[list[list[int]], float, float]:
    """Change points of every series; seconds of the retrospective pass and of the screen."""
    retrospective(list(series[0].values))  # warm-up: imports, caches
    found = []
    start = time.perf_counter()
    for s in series:
        found.append([cp.index for cp in retrospective(list(s.values)).change_points])
    retrospective_s = time.perf_counter() - start
    start = time.perf_counter()
    for s, cps in zip(series, found, strict=True):
        screen_latest(list(s.values), higher_is_better=False, segment_start=segment_start(cps, s.values.size))
    return found, retrospective_s, time.perf_counter() - start


def run_otava(python: str, series: list[Series]) -> tuple[list[list[int]], float]:
    job = {
        "series": [s.values.tolist() for s in series],
        "window_len": SETTINGS.window_len,
        "max_pvalue": SETTINGS.max_pvalue,
        "min_magnitude": SETTINGS.min_magnitude,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "series.json"
        path.write_text(json.dumps(job))
        driver = Path(tmp) / "driver.py"
        driver.write_text(OTAVA_DRIVER)
        out = subprocess.run([python, str(driver), str(path)], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    return result["change_points"], result["seconds"]


def matched(a: list[int], b: list[int]) -> int:
    """How many of a have one of b within TOLERANCE nights."""
    return sum(any(abs(x - y) <= TOLERANCE for y in b) for x in a)


def compare(series: list[Series], ours: list[list[int]], otava: list[list[int]]) -> None:
    stepped = [i for i, s in enumerate(series) if s.steps]
    steps = sum(len(series[i].steps) for i in stepped)
    same = sum(
        matched(ours[i], otava[i]) == len(ours[i]) and matched(otava[i], ours[i]) == len(otava[i])
        for i in stepped
    )
    print(
        f"\nagreement on the {len(stepped)} series with injected steps ({steps} steps), +-{TOLERANCE} night:"
    )
    print(f"  series whose change points agree one to one: {same / len(stepped):.3f}")
    print(f"  our change points that otava also has:       {_share(stepped, ours, otava)}")
    print(f"  otava's change points that we also have:     {_share(stepped, otava, ours)}")
    for name, found in (("ours", ours), ("otava", otava)):
        hits = sum(matched(list(series[i].steps), found[i]) for i in stepped)
        extra = sum(len(found[i]) - matched(found[i], list(series[i].steps)) for i in range(len(series)))
        print(f"  {name:>5}: injected steps found {hits / steps:.3f}, change points off any step: {extra}")


def _share(indices: list[int], a: list[list[int]], b: list[list[int]]) -> str:
    total = sum(len(a[i]) for i in indices)
    return f"{sum(matched(a[i], b[i]) for i in indices) / total:.3f} of {total}" if total else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--otava", metavar="PYTHON", help="interpreter of a virtualenv with apache-otava")
    parser.add_argument("--series", type=int, default=SERIES)
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    series = [make_series(rng) for _ in range(args.series)]
    ours, retrospective_s, screen = time_ours(series)
    total = retrospective_s + screen
    print(f"{args.series} series x {NIGHTS} nights, {sum(bool(s.steps) for s in series)} with injected steps")
    print(f"{SETTINGS}")
    print(
        f"retrospective pass: {retrospective_s:7.2f} s  "
        f"({1e3 * retrospective_s / args.series:.2f} ms per series)"
    )
    print(f"nightly screen:     {screen:7.2f} s  ({1e3 * screen / args.series:.3f} ms per series)")
    print(f"both:               {total:7.2f} s  (target < 10 s: {'met' if total < 10 else 'MISSED'})")
    if args.otava:
        otava, seconds = run_otava(args.otava, series)
        print(f"\napache-otava compute_change_points, same series and settings: {seconds:.2f} s")
        ratio = seconds / retrospective_s
        print(f"  ({1e3 * seconds / args.series:.2f} ms per series, {ratio:.1f}x our retrospective pass)")
        compare(series, ours, otava)


if __name__ == "__main__":
    main()
