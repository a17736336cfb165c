"""Pausing Python's cyclic garbage collector while a bulk read builds many small objects.

Reading a year of 1,000 series builds some million tuples, lists and rows in one go; every 700 allocations
start a collection, each older generation's walks the ever-growing heap, and together they cost twice the
read itself. None of these objects forms a cycle, so those walks find nothing: the collector's next regular
pass after the block sees them once instead.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The block runs without automatic collections; the collector's earlier state comes back after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
