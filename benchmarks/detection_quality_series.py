"""The quality benchmark's synthetic nightly series (benchmarks/detection_quality.py scores them), one
class at a time, seeded and deterministic.

Each is a step time of 60-365 nights with multiplicative noise of CV 0.5-3 %, in one of sixteen classes
(CLASSES: control, slow nights and clusters of them, steps, drifts, drifts with slow nights, transients,
pairs, short segments at very low noise, missing nights, too noisy). The detectors
see only the valued nights, so a `Series` holds those alone and indexes every injected change into them.
The classes: docs/design.md, "The synthetic series".

    .venv/bin/python benchmarks/detection_quality.py --quick
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
Rng = np.random.Generator

NOISE_LEVELS = (0.005, 0.01, 0.02, 0.03)
SHORTEST, LONGEST = 60, 365
BEFORE_CHANGE = 30
"""Nights before an injected change: enough for the screen's baseline (min_history 10) and a t-test."""
AFTER_CHANGE = 20
"""Nights after an injected event: the retrospective pass needs min_points_after, the nightly view
ATTRIBUTION."""
SLOW_NIGHT_RATE = 0.02
MISSING_RATE = 0.05


@dataclasses.dataclass(frozen=True)
class Injection:
    """What one class puts into a series, on calendar nights, before noise."""

    level: Array
    """The noiseless level (1 = the starting level), slow nights included."""
    changes: tuple[int, ...] = ()
    """Nights a level change takes effect (steps, both ends of blocks)."""
    blocks: tuple[tuple[int, int], ...] = ()
    """Stretches that came back (first night, one past the last): a transient; a pair's regression and its
    recovery."""
    regressions: tuple[int, ...] = ()
    persistent: bool = False
    """Whether the regressions stay (a step) rather than going away (a transient)."""
    drift: bool = False
    noise: float | None = None
    """The class's own noise, where it has one."""
    present: npt.NDArray[np.bool_] | None = None
    """Nights with a value (None: all)."""
    outliers: bool = False


@dataclasses.dataclass(frozen=True)
class Series:
    """One series as the detectors see it: valued nights only, every index (as in `Injection`) into them."""

    kind: str
    noise: float
    """The noise's CV."""
    values: Array
    changes: tuple[int, ...]
    blocks: tuple[tuple[int, int], ...]
    regressions: tuple[int, ...]
    persistent: bool
    drift: bool
    sizes: tuple[float, ...] = ()
    """Each change's size, level after / level before - 1 on the noiseless level (as `changes`)."""
    outliers: bool = False
    """Whether slow nights were put in (the outlier classes)."""


def _log_uniform(rng: Rng, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def _change_night(rng: Rng, nights: int, length: int = 0) -> int:
    """The first night of an event of `length` nights: BEFORE_CHANGE nights before it, AFTER_CHANGE after."""
    return int(rng.integers(BEFORE_CHANGE, nights - AFTER_CHANGE - length + 1))


def _step(
    rng: Rng, nights: int, up: bool, smallest: float = 0.02, largest: float = 0.2, noise: float | None = None
) -> Injection:
    level = np.ones(nights)
    night = _change_night(rng, nights)
    size = _log_uniform(rng, smallest, largest)
    level[night:] = 1 + size if up else 1 / (1 + size)
    return Injection(level, (night,), regressions=(night,) if up else (), persistent=up, noise=noise)


def _linear_drift(rng: Rng, nights: int) -> Array:
    total = rng.uniform(0.02, 0.08) * rng.choice([-1, 1])
    return 1 + total * np.arange(nights) / (nights - 1)


def _cyclic_drift(rng: Rng, nights: int) -> Injection:
    peak_to_peak = rng.uniform(0.02, 0.08)
    period = rng.uniform(0.5, 1.0) * nights
    phase = rng.uniform(0, 2 * np.pi)
    return Injection(
        1 + peak_to_peak / 2 * np.sin(2 * np.pi * np.arange(nights) / period + phase), drift=True
    )


def _step_on_drift(rng: Rng, nights: int) -> Injection:
    step = _step(rng, nights, up=bool(rng.random() < 0.5))
    return dataclasses.replace(step, level=step.level * _linear_drift(rng, nights), drift=True)


def _slow_nights(rng: Rng, nights: int) -> Injection:
    level = np.ones(nights)
    slow = rng.random(nights) < SLOW_NIGHT_RATE
    level[slow] *= 1 + rng.uniform(0.05, 0.3, int(slow.sum()))
    return Injection(level, outliers=True)


def _scattered_nights(rng: Rng, level: Array, clusters: int) -> None:
    """Slow nights into `level`, in place: the background rate of slow_nights, and `clusters` groups of 2-3
    isolated slow nights close together (one or two ordinary nights between them), each slowed on its own
    (5-30 %): values that scatter, not a level that holds, which is what tells outliers from a transient."""
    nights = level.size
    slow = rng.random(nights) < SLOW_NIGHT_RATE
    for _ in range(clusters):
        night = int(rng.integers(BEFORE_CHANGE, nights - AFTER_CHANGE))
        for _ in range(int(rng.integers(2, 4))):
            slow[min(night, nights - 1)] = True
            night += int(rng.integers(2, 4))
    level[slow] *= 1 + rng.uniform(0.05, 0.3, int(slow.sum()))


def _outlier_clusters(rng: Rng, nights: int) -> Injection:
    level = np.ones(nights)
    _scattered_nights(rng, level, int(rng.integers(1, 4)))
    return Injection(level, outliers=True)


def _drift_with_outliers(rng: Rng, nights: int) -> Injection:
    drift = _linear_drift(rng, nights) if rng.random() < 0.5 else _cyclic_drift(rng, nights).level
    level = drift.copy()
    _scattered_nights(rng, level, int(rng.integers(1, 3)))
    return Injection(level, drift=True, outliers=True)


def _short_segments(rng: Rng, nights: int) -> Injection:
    """A quiet series (noise 0.05-0.3 %, as a microbenchmark's) in which a drop of 2-5 % lasts 2-3 nights,
    the level comes back for 2-3 nights, and a step of 1.5-3 % follows: each segment short, but each change
    tens of noise widths."""
    length, back = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    start = _change_night(rng, nights, length + back)
    stop = start + length
    step = stop + back
    level = np.ones(nights)
    level[start:stop] = 1 - rng.uniform(0.02, 0.05)
    level[step:] = 1 + rng.choice([-1, 1]) * rng.uniform(0.015, 0.03)
    regressions = (step,) if level[step] > 1 else ()
    return Injection(
        level, (start, stop, step), ((start, stop),), regressions, persistent=bool(regressions),
        noise=_log_uniform(rng, 0.0005, 0.003),
    )  # fmt: skip


def _transient(rng: Rng, nights: int) -> Injection:
    length = int(rng.integers(2, 6))
    start = _change_night(rng, nights, length)
    level = np.ones(nights)
    level[start : start + length] = 1 + rng.uniform(0.05, 0.2)
    stop = start + length
    return Injection(level, (start, stop), ((start, stop),), regressions=(start,))


def _pair(rng: Rng, nights: int) -> Injection:
    gap = int(rng.integers(3, 11))
    first = _change_night(rng, nights, gap)
    second = first + gap
    level = np.ones(nights)
    level[first:] = 1 + _log_uniform(rng, 0.03, 0.2)
    if rng.random() < 0.5:  # its recovery
        level[second:] = 1
        return Injection(level, (first, second), ((first, second),), regressions=(first,))
    level[second:] *= 1 + _log_uniform(rng, 0.03, 0.2)
    return Injection(level, (first, second), regressions=(first, second), persistent=True)


def _missing(rng: Rng, nights: int) -> Injection:
    """`nights` nights with a value, less MISSING_RATE of them; the outage comes on top (calendar nights)."""
    outage = int(rng.integers(5, 21))
    calendar = nights + outage
    start = _change_night(rng, nights)
    present = rng.random(calendar) >= MISSING_RATE
    present[start : start + outage] = False
    level = np.ones(calendar)
    if rng.random() < 0.5:
        return Injection(level, present=present)
    up = bool(rng.random() < 0.5)
    size = _log_uniform(rng, 0.02, 0.2)
    night = start + outage
    level[night:] = 1 + size if up else 1 / (1 + size)
    return Injection(level, (night,), regressions=(night,) if up else (), persistent=up, present=present)


CLASSES: dict[str, Callable[[Rng, int], Injection]] = {
    "control": lambda rng, nights: Injection(np.ones(nights)),
    "slow_nights": _slow_nights,
    "step_up": lambda rng, nights: _step(rng, nights, up=True),
    "step_down": lambda rng, nights: _step(rng, nights, up=False),
    "step_3pct_1pct": lambda rng, nights: _step(rng, nights, up=True, smallest=0.03, noise=0.01),
    "drift_linear": lambda rng, nights: Injection(_linear_drift(rng, nights), drift=True),
    "drift_cyclic": _cyclic_drift,
    "step_on_drift": _step_on_drift,
    "transient": _transient,
    "pair": _pair,
    "missing": _missing,
    "too_noisy": lambda rng, nights: Injection(np.ones(nights), noise=rng.uniform(0.08, 0.15)),
    "outlier_clusters": _outlier_clusters,
    "drift_outliers": _drift_with_outliers,
    "short_segments": _short_segments,
    "small_step": lambda rng, nights: _step(
        rng,
        nights,
        up=bool(rng.random() < 0.5),
        smallest=0.02,
        largest=0.03,
        noise=float(rng.choice([0.02, 0.03])),
    ),
}


def make_series(kind: str, number: int, rng: Rng) -> Series:
    """The `number`-th series of class `kind`, as the store would give it to the detectors."""
    injected = CLASSES[kind](rng, int(rng.integers(SHORTEST, LONGEST + 1)))
    calendar = injected.level.size
    noise = injected.noise if injected.noise is not None else NOISE_LEVELS[number % len(NOISE_LEVELS)]
    values = injected.level * (1 + noise * rng.standard_normal(calendar))
    kept = np.flatnonzero(injected.present if injected.present is not None else np.ones(calendar, dtype=bool))

    def valued(night: int) -> int:
        """The index, among the valued nights, of the first one on or after calendar night `night`."""
        return int(np.searchsorted(kept, night))

    return Series(
        kind,
        noise,
        values[kept],
        tuple(valued(c) for c in injected.changes),
        tuple((valued(a), valued(b)) for a, b in injected.blocks),
        tuple(valued(r) for r in injected.regressions),
        injected.persistent,
        injected.drift,
        tuple(float(injected.level[c] / injected.level[c - 1] - 1) for c in injected.changes),
        injected.outliers,
    )


def make_all(per_class: int, seed: int) -> list[Series]:
    """Every class's series, each class from its own seeded stream (adding a class changes no other)."""
    return [
        make_series(kind, number, rng)
        for index, kind in enumerate(CLASSES)
        for rng in [np.random.default_rng([seed, index])]
        for number in range(per_class)
    ]
