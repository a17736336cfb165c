"""The quality benchmark's synthetic nightly series (benchmarks/detection_quality.py scores them), one
class at a time, seeded and deterministic.

Each is a step time of 60-365 nights with multiplicative noise of CV 0.5-3 %, in one of twelve classes
(CLASSES: control, slow nights, steps, drifts, transients, pairs, missing nights, too noisy). The detectors
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


def _log_uniform(rng: Rng, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def _change_night(rng: Rng, nights: int, length: int = 0) -> int:
    """The first night of an event of `length` nights: BEFORE_CHANGE nights before it, AFTER_CHANGE after."""
    return int(rng.integers(BEFORE_CHANGE, nights - AFTER_CHANGE - length + 1))


def _step(rng: Rng, nights: int, up: bool, smallest: float = 0.02, noise: float | None = None) -> Injection:
    level = np.ones(nights)
    night = _change_night(rng, nights)
    size = _log_uniform(rng, smallest, 0.2)
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
    return Injection(level)


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
    )


def make_all(per_class: int, seed: int) -> list[Series]:
    """Every class's series, each class from its own seeded stream (adding a class changes no other)."""
    return [
        make_series(kind, number, rng)
        for index, kind in enumerate(CLASSES)
        for rng in [np.random.default_rng([seed, index])]
        for number in range(per_class)
    ]
