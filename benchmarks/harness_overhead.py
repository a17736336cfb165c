"""How much the harness adds to a step: its timed loop (read the loss, NaN check, record, progress bar)
against a bare loop over the same compiled step, in one process, rounds alternating. Each round is timed
whole, from its first step's launch to its last step's completion, so the harness's work between steps
(which its own per-step clock leaves out) is counted; the per-step times the result reports are printed
too.

    .venv/bin/python benchmarks/harness_overhead.py                      # llama2 tiny, CPU
    .venv/bin/python benchmarks/harness_overhead.py --set model.d_model=256 --set model.seq_len=256

Prints the median step time of each loop and their ratio. Target: the harness within 1 % of the bare loop.
This is a benchmark script, not a test: timings on shared machines are noisy, so read the figures.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import jax
from rich.console import Console

from jaxbench.harness import recipes
from jaxbench.harness.backends.native import backend as native
from jaxbench.harness.backends.native import train
from jaxbench.harness.measure.stats import counterbalanced
from jaxbench.harness.runtime import preflight
from jaxbench.harness.runtime.outcome import StepLog
from jaxbench.harness.runtime.reporter import RichReporter

Loop = tuple[train.TrainState, list[float], float]
"""The state after the round, its per-step times, and the whole round's seconds per step."""


def bare_loop(step: train.StepFn, state: train.TrainState, count: int) -> Loop:
    times = []
    round_start = time.perf_counter()
    for _ in range(count):
        start = time.perf_counter()
        state, metrics = step(state)
        jax.block_until_ready((state, metrics))
        times.append(time.perf_counter() - start)
    return state, times, (time.perf_counter() - round_start) / count


def harness_loop(step: train.StepFn, state: train.TrainState, count: int) -> Loop:
    # The real reporter, drawing its progress bar into a buffer instead of the terminal.
    sink = Console(file=io.StringIO(), force_terminal=True, width=120)
    reporter = RichReporter(stdout=sink, stderr=sink)
    reporter.steps_started(count)
    log = StepLog()
    round_start = time.perf_counter()
    try:
        state = native.run_steps(step, state, count, log, on_step=reporter.step_done)
    finally:
        per_step = (time.perf_counter() - round_start) / count
        if reporter.progress is not None:
            reporter.progress.stop()
    return state, log.times, per_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="llama2")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--steps", type=int, default=10, help="steps per round")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of each loop, alternating")
    args = parser.parse_args()
    if args.rounds < 2 or args.steps < 1:
        parser.error("--rounds must be at least 2 (for quartiles) and --steps at least 1")

    devices = jax.devices()
    recipe = recipes.load(args.recipe, args.size, args.overrides)
    mesh_shape = preflight.check(recipe, native.machine_of(devices))
    program = train.prepare(recipe, mesh_shape, devices)
    state, _, _ = bare_loop(program.step, program.state, 10)  # warm up both paths' caches

    # Short rounds compared pair by pair, so that drift in a shared machine's speed affects both loops alike,
    # each pair's order alternating (`counterbalanced`), so that whatever favours a pair's second round does
    # too; the median of the per-pair ratios of whole-round time is the figure.
    loops = {"bare": bare_loop, "harness": harness_loop}
    times: dict[str, list[float]] = {"bare": [], "harness": []}
    ratios: list[float] = []
    for index in range(args.rounds):
        per_step: dict[str, float] = {}
        for name in counterbalanced(index, "bare", "harness"):
            state, round_times, per_step[name] = loops[name](program.step, state, args.steps)
            times[name] += round_times
        ratios.append(per_step["harness"] / per_step["bare"])

    q1, median_ratio, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"recipe: {recipe.name} on {len(devices)} x {devices[0].device_kind}; "
        f"{args.rounds} alternating rounds of {args.steps} steps per loop"
    )
    print(f"bare loop median step:    {statistics.median(times['bare']) * 1e3:9.3f} ms (per-step clock)")
    print(f"harness loop median step: {statistics.median(times['harness']) * 1e3:9.3f} ms (per-step clock)")
    print(
        f"harness overhead: {(median_ratio - 1) * 100:+.2f} % (median of per-round ratios of round times; "
        f"interquartile range {(q1 - 1) * 100:+.2f} .. {(q3 - 1) * 100:+.2f} %)"
    )


if __name__ == "__main__":
    main()
