"""Which nights a backfill makes, pure: the component's releases in the range, each on the night (UTC) it was
uploaded, as the nightly would have met them. A release uploaded after a newer version (a patch to an older
line: jax 0.8.3 came out after 0.9.0) is left out and said so: no nightly would have run it, and between its
neighbours it would read as a regression and a recovery. Two releases on one night: the newer one is that
night's.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/backfill/test_backfill_nights.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from packaging.version import Version

from jaxbench.containers.package_index import Release


@dataclasses.dataclass(frozen=True)
class PlannedNight:
    version: Version
    night: dt.date
    uploaded: dt.datetime

    @property
    def as_of(self) -> dt.datetime:
        """The end of the release's night (UTC): its companions are what was out by then."""
        return dt.datetime.combine(self.night, dt.time(23, 59, 59), dt.UTC)


@dataclasses.dataclass(frozen=True)
class Plan:
    nights: tuple[PlannedNight, ...]
    """Oldest first."""
    left_out: tuple[tuple[Version, str], ...]
    """Releases in the range that get no night, each with why."""


def plan_nights(releases: Sequence[Release]) -> Plan:
    """The nights of `releases` (package_index.between's: in the range, none yanked)."""
    left_out: list[tuple[Version, str]] = []
    dated = []
    for release in sorted(releases):
        if release.uploaded is None:
            left_out.append((release.version, "the index gives no upload time"))
        else:
            dated.append(release)
    by_night: dict[dt.date, PlannedNight] = {}
    newest: Release | None = None
    for release in sorted(dated, key=lambda r: (r.uploaded, r.version)):
        assert release.uploaded is not None
        if newest is not None and release.version < newest.version:
            left_out.append(
                (
                    release.version,
                    f"uploaded after {newest.version} (a patch to an older line): no nightly ran it",
                )
            )
            continue
        newest = release
        night = release.uploaded.astimezone(dt.UTC).date()
        if night in by_night:
            left_out.append((by_night[night].version, f"{release.version} came out the same night"))
        by_night[night] = PlannedNight(release.version, night, release.uploaded)
    nights = tuple(sorted(by_night.values(), key=lambda n: n.night))
    return Plan(nights, tuple(sorted(left_out)))
