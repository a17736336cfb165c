"""How long the static dashboard takes to build for a large store: by default 1,000 series x 365 nights.

    .venv/bin/python benchmarks/dashboard_speed.py                      # 1,000 series x 365 nights
    .venv/bin/python benchmarks/dashboard_speed.py --series 200 --nights 90 --keep site/

The report is synthetic (seeded): 25 benchmarks x 4 metrics x 10 hardware classes, a step change in one
series of 5, a failed night in one of 20, and an incident per 40 series. Prints the time to build the whole
site (write_dashboard, including writing the files and copying plotly.js), best of --repeat, and its size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import random
import tempfile
import time
from pathlib import Path

from jaxbench.results.judgement.vocabulary import IncidentKind, IncidentState, SeriesState
from jaxbench.results.report.html import write_dashboard
from jaxbench.results.report.model import (
    Baseline,
    ChangePointView,
    IncidentSeries,
    IncidentView,
    Report,
    Segment,
    SeriesPoint,
    SeriesView,
)

METRICS = [("perf/step_time_s", "s", False), ("perf/tokens_per_s_per_device", "tokens/s", True),
           ("memory/peak_bytes", "bytes", False), ("compile/time_s", "s", False)]  # fmt: skip


def synthetic_series(index: int, nights: int, rng: random.Random) -> SeriesView:
    metric, unit, higher_is_better = METRICS[index % len(METRICS)]
    hardware = f"8 x NVIDIA GPU model {index // len(METRICS) % 10} x 1 host"
    start = dt.date(2025, 1, 1)
    level = rng.uniform(0.1, 5000.0)
    shift_at = rng.randrange(nights // 2, nights) if index % 5 == 0 else None
    shift = rng.choice([-0.08, 0.08])
    values = [
        None if index % 20 == 0 and i == nights // 3
        else level * (1 + (shift if shift_at is not None and i >= shift_at else 0)) * (1 + rng.gauss(0, 0.01))
        for i in range(nights)
    ]  # fmt: skip
    points = [
        SeriesPoint(start + dt.timedelta(days=i), v, "ok" if v is not None else "oom", i)
        for i, v in enumerate(values)
    ]
    bounds = [0, shift_at, nights] if shift_at is not None else [0, nights]
    segments = [Segment(a, b, level) for a, b in itertools.pairwise(bounds)]
    change_points = []
    state = SeriesState.OK
    if shift_at is not None:
        regression = (shift > 0) != higher_is_better
        change_points = [ChangePointView(shift_at, points[shift_at].night, shift, 1e-5, regression)]
        state = SeriesState.REGRESSION if regression else SeriesState.IMPROVEMENT
    newest = values[-1]
    return SeriesView(
        key=f"bench-{index // 40:02d}.{metric.replace('/', '.')}.{index}",
        benchmark=f"bench-{index // 40:02d}", metric=metric, unit=unit, higher_is_better=higher_is_better,
        hardware=hardware, flavor="", settings={"precision": "bf16", "xla_flags": "--xla_foo=true"},
        points=points, segments=segments, change_points=change_points,
        baseline=Baseline(level, level * 0.97, level * 1.03), state=state,
        change_vs_baseline=newest / level - 1 if newest is not None else None,
    )  # fmt: skip


def synthetic_report(series_count: int, nights: int) -> Report:
    rng = random.Random(0)
    series = [synthetic_series(i, nights, rng) for i in range(series_count)]
    incidents = [
        IncidentView(
            id=n, fingerprint=f"fp-{n}", kind=IncidentKind.THROUGHPUT, state=IncidentState.OPEN,
            hardware=s.hardware, night=s.points[-1].night, last_good_night=s.points[-2].night,
            series=[IncidentSeries(s.key, s.benchmark, s.metric, 0.08, s.state)], components=[],
            flag_changes=[], env_changes=[], verdict=None, summary="synthetic",
        )
        for n, s in enumerate(series[::40], start=1)
    ]  # fmt: skip
    return Report(dt.datetime.now(dt.UTC), "synthetic", series, incidents)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build the site here and keep it (else a temporary dir)")
    args = parser.parse_args()

    report = synthetic_report(args.series, args.nights)
    build_times = []
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp) / "site"
        for _ in range(args.repeat):
            start = time.perf_counter()
            index = write_dashboard(report, out)
            build_times.append(time.perf_counter() - start)
        files = [p for p in index.parent.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
    print(f"{args.series} series x {args.nights} nights, {len(report.incidents)} incidents")
    print(f"whole dashboard: {min(build_times):.2f} s (best of {args.repeat}), ", end="")
    print(f"{len(files)} files, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
