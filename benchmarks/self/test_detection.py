"""Our retrospective change-point pass against Apache Otava's on the same synthetic year-long series, when
OTAVA_PYTHON names an interpreter with apache-otava (benchmarks/detection_speed.py's series and driver);
else skipped. Its time_vs_otava is our median time over Otava's time for the same series.

    OTAVA_PYTHON=/tmp/otava-venv/bin/python .venv/bin/python -m pytest benchmarks/self/test_detection.py
"""

from __future__ import annotations

import numpy as np
from pytest_benchmark.fixture import BenchmarkFixture

from benchmarks import detection_speed
from benchmarks.self.sizes import Size
from jaxbench.results.detection import retrospective

SEED = 20261122
"""detection_speed.py's default seed: the same series as its figures."""


def test_detection_against_otava(benchmark: BenchmarkFixture, size: Size, otava_python: str) -> None:
    rng = np.random.default_rng(SEED)
    series = [detection_speed.make_series(rng) for _ in range(size.otava_series)]
    values = [list(s.values) for s in series]

    def ours() -> None:
        for one in values:
            retrospective(one)

    benchmark.pedantic(ours, rounds=size.rounds, warmup_rounds=1)
    assert benchmark.stats is not None, "pytest-benchmark timed nothing: disabled (under pytest-xdist?)"
    _, otava_seconds = detection_speed.run_otava(otava_python, series)
    benchmark.extra_info["time_vs_otava"] = benchmark.stats.stats.median / otava_seconds
