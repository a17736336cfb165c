"""What a triage's runs are timed by, and which of them count: the clock (the wall clock, or the CPU time of
the run's process, unless that scatters more) and the runs other work starved of CPU. Pure functions of the
runs' figures; why each rule: docs/design.md, "The statistics of a triage".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jaxbench.triage.stacks import StepClock

STARVED_FRACTION = 0.85
"""A run is starved of CPU when its process used less than this share of the CPU per wall second that the
triage's runs typically used."""
STARVED_PEERS = 4
"""Runs that must have measured their CPU before any is judged starved: the typical share needs a few."""
STARVED_SPREADS = 3.0
"""... and it must lie this many robust standard deviations (1.4826 MAD) of the shares below their median:
where every run is starved alike (a busy machine), shares scatter widely and no run is an outlier of them."""
CPU_TOLERANCE = 1.25
"""CPU time is timed by unless its runs scatter more than this many times the wall clock's. The spreads come
from the first round alone, and a triage lasts many minutes: load that starts later moves the wall clock and
hardly the CPU time, while on a quiet CPU the two clocks agree, so CPU time is kept wherever it is not
clearly the noisier."""


def starved_runs(cpu_per_wall: Sequence[float | None]) -> list[bool]:
    """Which runs other work starved of CPU: those whose CPU per wall second lies below STARVED_FRACTION
    of the median over all runs that measured it, and STARVED_SPREADS robust deviations below it, once at
    least STARVED_PEERS measured it. A run that measured none (a framework's trainer, an older result) is
    never called starved."""
    measured = np.asarray([share for share in cpu_per_wall if share is not None and share > 0])
    if len(measured) < STARVED_PEERS:
        return [False] * len(cpu_per_wall)
    typical = float(np.median(measured))
    spread = 1.4826 * float(np.median(np.abs(measured - typical)))
    floor = min(STARVED_FRACTION * typical, typical - STARVED_SPREADS * spread)
    return [share is not None and share < floor for share in cpu_per_wall]


def spread(*sides: Sequence[float]) -> float:
    """How far runs of one stack scatter: the median absolute deviation of the log of each run's time from
    its own side's median, pooled over the sides (a relative spread: 0.01 is about 1 %)."""
    logs = [np.log(np.asarray(side, dtype=float)) for side in sides]
    if not logs or not all(side.size and np.all(np.isfinite(side)) for side in logs):
        raise ValueError("spread: needs finite, positive times on every side")
    return float(np.median(np.concatenate([np.abs(side - np.median(side)) for side in logs])))


def clock_spreads(
    good: Mapping[StepClock, Sequence[float]], bad: Mapping[StepClock, Sequence[float]]
) -> dict[StepClock, float]:
    """Each clock's `spread` over the ends' runs, where every run measured every clock; {} otherwise."""
    counts = {len(runs.get(clock, ())) for runs in (good, bad) for clock in StepClock}
    if len(counts) != 1 or not counts.pop():
        return {}
    return {clock: spread(good[clock], bad[clock]) for clock in StepClock}


def choose_clock(spreads: Mapping[StepClock, float]) -> StepClock:
    """The clock to time a triage by, from the spreads of its ends' first runs (`clock_spreads`): CPU time
    unless its runs scatter more than CPU_TOLERANCE times the wall clock's; the wall clock then, and where
    CPU time was not measured by every run. The spread within each end decides, not the gap between them:
    choosing the clock that shows the larger regression would bias every verdict after it."""
    if StepClock.CPU not in spreads or StepClock.WALL not in spreads:
        return StepClock.WALL
    noisier = spreads[StepClock.CPU] > CPU_TOLERANCE * spreads[StepClock.WALL]
    return StepClock.WALL if noisier else StepClock.CPU
