"""Least-squares fits of one target on several column sets of one design, from a single QR decomposition:
the episodes' model comparisons (results/detection/episodes.py) ask for a dozen fits per series, each of a
design's first columns or of all its columns but one, and a fit by lstsq costs about 45 us, a QR 12.

With R the triangular factor of [design | target] (Householder, as stable as lstsq), the residual sum of
squares of the first m columns is the sum of squares of R[m:, -1] (the last of them is the whole design's
residual norm), and leaving column j out of the whole design adds beta_j^2 / ((X'X)^-1)_jj to it (the
t-test of beta_j). A design with no more rows than columns, or with columns that depend on each other, is
fitted column set by column set with lstsq instead, which copes with both.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection_numerics.py
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import linalg, special

from jaxbench.results.detection.medians import median

Array = npt.NDArray[np.float64]

_DEPENDENT = 1e-10
"""A column whose part independent of the columns before it is smaller than this share of the largest
(|R_jj| / max |R_ii|) depends on them: the design is fitted with lstsq."""


@dataclasses.dataclass(frozen=True)
class Fit:
    """A least-squares fit's residual sum of squares, number of coefficients and of rows."""

    rss: float
    parameters: int
    size: int

    @property
    def bic(self) -> float:
        """Schwarz's criterion for a Gaussian fit: lower is better."""
        return self.size * math.log(max(self.rss, 1e-300) / self.size) + self.parameters * math.log(self.size)


def f_pvalue(reduced: Fit, full: Fit) -> float:
    """The F-test of the full model's extra columns against the reduced model."""
    extra = full.parameters - reduced.parameters
    df = full.size - full.parameters
    if extra <= 0 or df <= 0:
        return 1.0
    if full.rss <= 0:
        return 0.0 if reduced.rss > 0 else 1.0
    f = ((reduced.rss - full.rss) / extra) / (full.rss / df)
    # scipy.stats.f.sf(f, extra, df) is this function behind 40 us of argument checks.
    return float(special.fdtrc(extra, df, f)) if f > 0 else 1.0


class LeastSquares:
    """Fits of `target` on the first columns of `design`, or on all its columns but one."""

    def __init__(self, design: Array, target: Array) -> None:
        self.design, self.target = design, target
        self.size, self.columns = design.shape
        self._r: Array | None = None
        self._inverse: Array | None = None
        if self.size > self.columns:
            (r,) = linalg.qr(np.hstack([design, target[:, None]]), mode="r", check_finite=False)
            r = r[: self.columns + 1]  # the rest is zeros
            diagonal = np.abs(np.diagonal(r)[: self.columns])
            if diagonal.min() > _DEPENDENT * diagonal.max():
                self._r = r
                # The residual sum of squares of the first m columns, for every m.
                self._rss = np.cumsum(r[::-1, -1] ** 2)[::-1].tolist()

    def leading(self, m: int) -> Fit:
        """The fit on the first m columns."""
        if self._r is None:
            return Fit(self._lstsq(np.arange(m))[1], m, self.size)
        return Fit(self._rss[m], m, self.size)

    def without(self, j: int) -> Fit:
        """The fit on every column but column j."""
        if self._r is None:
            return Fit(self._lstsq(np.delete(np.arange(self.columns), j))[1], self.columns - 1, self.size)
        inverse = self._inverse_r()
        beta = float(inverse[j] @ self._r[: self.columns, -1])
        added = beta * beta / float(inverse[j] @ inverse[j])
        return Fit(self._rss[self.columns] + added, self.columns - 1, self.size)

    def coefficients(self, m: int) -> Array:
        """The coefficients of the fit on the first m columns."""
        if self._r is None:
            return self._lstsq(np.arange(m))[0]
        if m == self.columns:
            return self._inverse_r() @ self._r[:m, -1]
        return np.linalg.solve(self._r[:m, :m], self._r[:m, -1])

    def _inverse_r(self) -> Array:
        if self._inverse is None:
            assert self._r is not None
            self._inverse = np.linalg.inv(self._r[: self.columns, : self.columns])
        return self._inverse

    def _lstsq(self, columns: npt.NDArray[np.int64]) -> tuple[Array, float]:
        x = self.design[:, columns]
        coefficients = np.linalg.lstsq(x, self.target, rcond=None)[0]
        residual = self.target - x @ coefficients
        return coefficients, float(residual @ residual)


def step_or_line(y: Array, bounds: Sequence[int], shortest: int) -> list[tuple[Fit, Fit, Fit] | None]:
    """For each change point bounds[k + 1] (bounds: 0, the change points, y.size), three fits to its two
    segments y[bounds[k]:bounds[k + 2]]: a level and the step, a level and a line, and all three; in
    closed form from the segments' sums (episodes._steps_not_a_line weighs them). None where the two
    segments hold fewer than `shortest` nights (at least 3).

    Over a segment of n nights the line's abscissa runs evenly from -1 to 1, so its sum is 0 and its sum of
    squares n (n + 1) / (3 (n - 1)); a step after n1 of the nights (n2 after it) has n1 n2 / n as its sum of
    squares about its mean and n1 n2 / (n - 1) as its sum of products with the line. With those, each fit
    is the textbook one- or two-regressor formula. The series is centred on its median first, so that the
    sums keep their precision far from zero."""
    centred = y - median(y)
    nights = np.arange(y.size)
    sums = np.add.reduceat(np.stack([centred, centred * centred, nights * centred]), bounds[:-1], axis=1)
    total, squares, moment = sums.tolist()
    fits: list[tuple[Fit, Fit, Fit] | None] = []
    for k in range(len(bounds) - 2):
        first, split, stop = bounds[k : k + 3]
        n, n1, n2 = stop - first, split - first, stop - split
        if n < max(shortest, 3):
            fits.append(None)
            continue
        both_total = total[k] + total[k + 1]
        mean = both_total / n
        spread = max(squares[k] + squares[k + 1] - both_total * mean, 0.0)  # about the mean
        line_y = 2 * (moment[k] + moment[k + 1] - first * both_total) / (n - 1) - both_total
        step_y = total[k + 1] - n2 * mean
        line_line, step_step, line_step = n * (n + 1) / (3 * (n - 1)), n1 * n2 / n, n1 * n2 / (n - 1)
        line = max(spread - line_y * line_y / line_line, 0.0)
        step = max(spread - step_y * step_y / step_step, 0.0)
        # The step's part that the line does not explain, and what it adds to the line's fit.
        step_beyond = step_y - line_step * line_y / line_line
        both = max(line - step_beyond * step_beyond / (step_step - line_step * line_step / line_line), 0.0)
        fits.append((Fit(step, 2, n), Fit(line, 2, n), Fit(both, 3, n)))
    return fits
