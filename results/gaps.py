"""Which nights of a series become gaps when a batch of runs is written: pure, so that a batch of thousands
of files needs a few queries per distinct night, not per file (results/writes.py: write_runs).

A gap is a night without a run between two nights of a series that have one. A batch's night N of a series
makes gaps of the nights between N and the series' nearest measured night on either side (stored before, or
in the batch), and N stops being one; so the gaps do not depend on the order the files come in, nor on how
they are split into batches (a backfill of older nights fills in the gaps before the stored history).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

SeriesNight = tuple[int, dt.date]


def _between(series: int, low: dt.date, high: dt.date) -> set[SeriesNight]:
    return {(series, low + dt.timedelta(days=d)) for d in range(1, (high - low).days)}


def batch_gaps(
    measured: Sequence[SeriesNight],
    stored_before: Mapping[SeriesNight, dt.date],
    stored_after: Mapping[SeriesNight, dt.date],
) -> set[SeriesNight]:
    """The gaps to add: `measured` is each (series, night) the batch writes; `stored_before[(series,
    night)]` / `stored_after[...]` the series' nearest stored night before / after that night, where it has
    one. A night the batch measures is never among them (the store's own gap rows for those nights are
    removed)."""
    batch: dict[int, list[dt.date]] = {}
    for series, night in sorted(set(measured)):
        batch.setdefault(series, []).append(night)
    gaps: set[SeriesNight] = set()
    for series, nights in batch.items():
        for index, night in enumerate(nights):
            earlier = [*nights[index - 1 : index], *filter(None, [stored_before.get((series, night))])]
            later = [*nights[index + 1 : index + 2], *filter(None, [stored_after.get((series, night))])]
            if earlier:
                gaps |= _between(series, max(earlier), night)
            if later:
                gaps |= _between(series, night, min(later))
    return gaps - set(measured)
