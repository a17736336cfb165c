"""How much the harness adds to a step: its timed loop (read the loss, NaN check, record, progress bar)
against a bare loop over the same compiled step, in one process, rounds alternating. Both loops synchronise
on the step's whole output before reading the clock, so the difference is the harness's own work.

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

from harness import preflight, recipes, runner, train
from harness.console import RichReporter


def bare_loop(
    step: train.StepFn, state: train.TrainState, count: int
) -> tuple[train.TrainState, list[float]]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        state, metrics = step(state)
        jax.block_until_ready((state, metrics))
        times.append(time.perf_counter() - start)
    return state, times


def harness_loop(
    step: train.StepFn, state: train.TrainState, count: int
) -> tuple[train.TrainState, list[float]]:
    # The real reporter, drawing its progress bar into a buffer instead of the terminal.
    sink = Console(file=io.StringIO(), force_terminal=True, width=120)
    reporter = RichReporter(stdout=sink, stderr=sink)
    reporter.steps_started(count)
    log = runner.StepLog()
    try:
        state = runner.run_steps(step, state, count, log, on_step=reporter.step_done)
    finally:
        if reporter.progress is not None:
            reporter.progress.stop()
    return state, log.times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="llama2")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--steps", type=int, default=10, help="steps per round")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of each loop, alternating")
    args = parser.parse_args()

    devices = jax.devices()
    recipe = recipes.load(args.recipe, args.size, args.overrides)
    mesh_shape = preflight.check(recipe, runner.machine_of(devices))
    program = train.prepare(recipe, mesh_shape, devices)
    state, _ = bare_loop(program.step, program.state, 10)  # warm up both paths' caches

    # Short alternating rounds compared pair by pair, so that drift in a shared machine's speed affects both
    # loops alike; the median of the per-pair ratios is the figure.
    bare_times: list[float] = []
    harness_times: list[float] = []
    ratios: list[float] = []
    for _ in range(args.rounds):
        state, bare_round = bare_loop(program.step, state, args.steps)
        state, harness_round = harness_loop(program.step, state, args.steps)
        bare_times += bare_round
        harness_times += harness_round
        ratios.append(statistics.median(harness_round) / statistics.median(bare_round))

    q1, median_ratio, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"recipe: {recipe.name} on {len(devices)} x {devices[0].device_kind}; "
        f"{args.rounds} alternating rounds of {args.steps} steps per loop"
    )
    print(f"bare loop median step:    {statistics.median(bare_times) * 1e3:9.3f} ms")
    print(f"harness loop median step: {statistics.median(harness_times) * 1e3:9.3f} ms")
    print(
        f"harness overhead: {(median_ratio - 1) * 100:+.2f} % (median of per-round ratios; "
        f"interquartile range {(q1 - 1) * 100:+.2f} .. {(q3 - 1) * 100:+.2f} %)"
    )


if __name__ == "__main__":
    main()
