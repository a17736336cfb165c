"""Whether a few nights hold one level or scatter: the question a window of the screen, a transient's block
and a short segment of the retrospective pass all answer the same way (settings.LevelAgreement).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_episodes.py -k scatter
"""

from __future__ import annotations

from typing import overload

import numpy as np
import numpy.typing as npt

from jaxbench.results.detection.settings import LevelAgreement

Array = npt.NDArray[np.float64]


@overload
def holds_a_level(spread: float, noise: float, shift: float, agreement: LevelAgreement) -> bool: ...
@overload
def holds_a_level(
    spread: Array, noise: float, shift: Array, agreement: LevelAgreement
) -> npt.NDArray[np.bool_]: ...
def holds_a_level(
    spread: float | Array, noise: float, shift: float | Array, agreement: LevelAgreement
) -> bool | npt.NDArray[np.bool_]:
    """Whether nights whose values span `spread` (max - min) agree as one level does, on a series whose one
    night varies by `noise` (a standard deviation), `shift` away from the level around them: within
    max_spread noise widths, or within max_spread_of_shift of the shift (a large shift varies more)."""
    limit = np.maximum(agreement.max_spread * noise, agreement.max_spread_of_shift * np.abs(shift))
    held = np.asarray(spread) <= limit
    return bool(held) if held.ndim == 0 else held
