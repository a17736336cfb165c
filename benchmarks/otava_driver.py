"""apache-otava's change points on the quality benchmark's series, run inside otava's own virtualenv (it pins
numpy 2.2, so it cannot share jaxbench's environment); benchmarks/detection_quality.py writes the job and runs

    /tmp/otava-venv/bin/python benchmarks/otava_driver.py JOB.json

The job (JSON): window_len, max_pvalue, min_magnitude (passed to otava.analysis.compute_change_points as
they are), tolerance (nights), and series: a list of {values, changes, stop}. For each series the driver
prints its change points on the whole series and, for each injected change those find (a change point within
`tolerance` nights), the first night t < stop on which compute_change_points(values[:t + 1]) already finds
it: the night the nightly job would first have reported it. This imports nothing of jaxbench.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence

from otava.analysis import compute_change_points


def change_points(values: Sequence[float], job: dict[str, float]) -> list[int]:
    found, _ = compute_change_points(
        list(values),
        window_len=int(job["window_len"]),
        max_pvalue=job["max_pvalue"],
        min_magnitude=job["min_magnitude"],
    )
    return [int(cp.index) for cp in found]


def near(indices: Sequence[int], night: int, tolerance: int) -> bool:
    return any(abs(index - night) <= tolerance for index in indices)


def first_report(values: Sequence[float], change: int, stop: int, job: dict[str, float]) -> int | None:
    """The first night (index) whose prefix has a change point near `change`; None before `stop`."""
    tolerance = int(job["tolerance"])
    for night in range(change + 1, stop):
        if near(change_points(values[: night + 1], job), change, tolerance):
            return night
    return None


def main() -> None:
    with open(sys.argv[1]) as file:
        job = json.load(file)
    settings = {key: job[key] for key in ("window_len", "max_pvalue", "min_magnitude", "tolerance")}
    begin = time.perf_counter()
    found: list[list[int]] = []
    reported: list[list[int | None]] = []
    for series in job["series"]:
        values = series["values"]
        whole = change_points(values, settings)
        found.append(whole)
        reported.append(
            [
                first_report(values, change, series["stop"], settings)
                if near(whole, change, int(settings["tolerance"]))
                else None
                for change in series["changes"]
            ]
        )
    seconds = time.perf_counter() - begin
    print(json.dumps({"seconds": seconds, "change_points": found, "reported": reported}))


if __name__ == "__main__":
    main()
