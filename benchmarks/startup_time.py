"""Start-up time of the `jaxbench` commands that do not train, next to a bare interpreter: what a user waits
for before `--help`, `recipes`, the nightly's first job or a report of an empty store answers. Each command
runs in a fresh process, alternating with the others round by round (so a drift of the machine hits all
alike); the figure is the median wall time over the rounds, with the interquartile range, and the median
minus the bare interpreter's.

    .venv/bin/python benchmarks/startup_time.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "jaxbench --help": [sys.executable, "-m", "jaxbench", "--help"],
    "jaxbench recipes": [sys.executable, "-m", "jaxbench", "recipes"],
    "jaxbench nightly plan": [
        sys.executable,
        "-m",
        "jaxbench",
        "nightly",
        "plan",
        "--flavors",
        "cpu",
        "--arches",
        "amd64",
        "--bench-flavor",
        "cpu",
        "--owner",
        "me",
    ],
    "jaxbench report (empty)": [sys.executable, "-m", "jaxbench", "report"],
    "import jax (for scale)": [sys.executable, "-c", "import jax"],
}
EMPTY_STORE = Path(tempfile.mkdtemp(prefix="startup-time-")) / "empty.sqlite"
"""The store `jaxbench report` reads: made by the unmeasured first run, empty after it."""


def wall_time(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv,
        cwd=REPO,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "JAXBENCH_DB": f"sqlite:///{EMPTY_STORE}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="runs of each command (default 15)")
    args = parser.parse_args()
    if args.rounds < 4:
        parser.error("--rounds must be at least 4 (for quartiles)")
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for argv in COMMANDS.values():  # one unmeasured run each: the file cache warms for all alike
        wall_time(argv)
    for _ in range(args.rounds):
        for name, argv in COMMANDS.items():
            times[name].append(wall_time(argv))
    bare = statistics.median(times["python -c pass"])
    print(f"{args.rounds} alternating rounds; wall time of a fresh process, median [interquartile range]")
    for name, samples in times.items():
        q1, median, q3 = statistics.quantiles(samples, n=4)
        extra = "" if name == "python -c pass" else f"   +{(median - bare) * 1e3:6.0f} ms over python"
        print(f"{name:24s} {median * 1e3:7.0f} ms  [{q1 * 1e3:5.0f} .. {q3 * 1e3:5.0f}]{extra}")


if __name__ == "__main__":
    main()
