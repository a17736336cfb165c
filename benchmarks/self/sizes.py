"""How much work each self-bench benchmark does: `full` for `make self-bench` (about two minutes on 2 cores),
`small` for a check in seconds (the regression test of tests/results/test_self_bench.py times its ingest).

    .venv/bin/python -m pytest benchmarks/self --self-size small
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Size:
    rounds: int
    """Timed rounds of every benchmark, after one warm-up round: the series' value is their median."""
    ingest_files: int
    """Synthetic result files per ingest (7 results each), into a fresh, migrated SQLite store each round."""
    series: int
    """Series of the store the detection judges and the dashboard shows..."""
    nights: int
    """... each this many nights long."""
    otava_series: int
    """Series of 365 nights that our change-point pass and Otava's both judge."""


SIZES = {
    "full": Size(rounds=5, ingest_files=500, series=200, nights=365, otava_series=50),
    "small": Size(rounds=3, ingest_files=30, series=10, nights=60, otava_series=5),
}
