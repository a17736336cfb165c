"""The results store at scale: ingest 100,000 results, judge 1,000 series x 365 nights, build the dashboard.

    .venv/bin/python benchmarks/store_speed.py                 # SQLite in a temporary folder
    .venv/bin/python benchmarks/store_speed.py --db postgresql+psycopg://...   # an empty PostgreSQL database

Prints each phase's wall time. Targets: the full nightly detection (load, judge, store the judgements) in
under 10 s on 2 cores. The pure detection alone, and Apache Otava on the same series, are measured by
benchmarks/detection_speed.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import tempfile
import time
from pathlib import Path

from sqlalchemy import Engine, insert

from jaxbench.results import commands, schema, store, synthetic
from jaxbench.results.judgement.detect import detect
from jaxbench.results.report.build import build_report
from jaxbench.results.report.html import write_dashboard

START = dt.date(2025, 1, 1)


def timed(label: str, action):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = action()
    print(f"{label:<48} {time.perf_counter() - start:8.2f} s")
    return value


RESULTS_PER_FILE = 7
"""The metrics of one synthetic recipe run (results/synthetic.py): step time, two throughputs, model TFLOP/s,
MFU, compile time, final loss."""


def result_files(folder: Path, files: int) -> list[Path]:
    """`files` synthetic result files (seeded): a year of nights per recipe, as many recipes as it takes, step
    times of 1 % noise. Also the self-bench's ingest (benchmarks/self/test_store.py)."""
    rng = random.Random(0)
    return [
        synthetic.write(
            folder,
            synthetic.run_result(
                START + dt.timedelta(days=i % 365),
                0.5 * (1 + rng.gauss(0, 0.01)),
                recipe=f"llama2-{i // 365}b",
            ),
        )
        for i in range(files)
    ]


def ingest_phase(url: str, folder: Path, results: int) -> None:
    files = results // RESULTS_PER_FILE
    paths = timed(f"write {files:,} result files", lambda: result_files(folder, files))
    engine = store.connect(url)
    summary = timed(
        f"ingest {files * RESULTS_PER_FILE:,} results ({files:,} files)",
        lambda: commands.ingest(engine, paths),
    )
    assert len(summary.added) == files


def fill_nightly_store(engine: Engine, series: int, nights: int) -> None:
    """series x nights results written straight into the tables (the ingest path is measured above); a step
    of +-10 % in one series of 20. Also the self-bench's store (benchmarks/self/test_store.py)."""
    rng = random.Random(1)
    now = dt.datetime.now(dt.UTC)
    with engine.begin() as connection:
        connection.execute(
            insert(schema.Series),
            [
                {
                    "identity_hash": f"{i:064x}",
                    "benchmark": f"bench-{i // 10}",
                    "kind": "recipe",
                    "settings": {},
                    "device_kind": "NVIDIA H100 80GB HBM3",
                    "devices_per_host": 8,
                    "hosts": 1 + i % 2,
                    "flavor": "jax",
                    "metric": f"perf/metric_{i % 10}",
                    "unit": "s",
                    "higher_is_better": False,
                }
                for i in range(series)
            ],
        )
        connection.execute(
            insert(schema.Run),
            [
                {
                    "source_hash": f"{n:064x}",
                    "source_kind": "harness",
                    "night": START + dt.timedelta(days=n),
                    "hosts": 1,
                    "status": "ok",
                    "config": {},
                    "environment": {},
                    "ingested_at": now,
                }
                for n in range(nights)
            ],
        )
        steps = {
            i: (rng.randrange(nights // 2, nights), rng.choice([0.9, 1.1])) for i in range(0, series, 20)
        }
        for night in range(nights):
            rows = []
            for i in range(series):
                when, factor = steps.get(i, (nights, 1.0))
                value = (1 + i % 7) * (factor if night >= when else 1.0) * (1 + rng.gauss(0, 0.01))
                rows.append({"run_id": night + 1, "series_id": i + 1, "value": value, "status": "ok"})
            connection.execute(insert(schema.Result), rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="an empty database URL (default: SQLite files in a temporary folder)")
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--series", type=int, default=1_000)
    parser.add_argument("--nights", type=int, default=365)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        ingest_phase(args.db or f"sqlite:///{folder / 'ingest.sqlite'}", folder / "files", args.results)
        engine = store.connect(args.db or f"sqlite:///{folder / 'nightly.sqlite'}")
        if args.db:  # one database: start the detection phase from a clean slate
            with engine.begin() as connection:
                for table in reversed(schema.Base.metadata.sorted_tables):
                    connection.execute(table.delete())
        timed(
            f"fill {args.series:,} series x {args.nights} nights",
            lambda: fill_nightly_store(engine, args.series, args.nights),
        )
        detection = timed("full nightly detection (jaxbench detect)", lambda: detect(engine))
        report = build_report(detection, "benchmark")
        timed("build the dashboard", lambda: write_dashboard(report, folder / "site"))
        print(
            f"{len(detection.analyses):,} series judged, {len(detection.incidents)} incidents "
            f"({len(detection.open_incidents)} open)"
        )


if __name__ == "__main__":
    main()
