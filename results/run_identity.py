"""Which run a file holds: its run id in one canonical form, and what the run recorded, to tell the same run
ingested again (nothing to add) from another outcome under its run id (refused, naming what differs).

A run id is compared in its canonical form (`canonical_run_id`): NFKC-normalised, format characters (zero
width spaces, bidi controls, a byte-order mark) removed, blanks stripped, lower case. The harness writes a
UUID (32 hex digits), which is case-insensitive (RFC 9562); an id retyped in upper case, pasted with a
trailing space or a zero-width character is the same run, not a second one. What remains must be printable
ASCII without blanks.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_ingest_atomic.py -k run_id
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from jaxbench.results.records import ParsedRun

RUN_ID = re.compile(r"[!-~]+")
"""A canonical run id: printable ASCII, no blanks."""


def canonical_run_id(text: str) -> str:
    """`text` as the store keys runs by (see the module docstring); ValueError saying what was expected where
    nothing printable is left, or a blank or a character outside ASCII remains."""
    shown = unicodedata.normalize("NFKC", text)
    canonical = "".join(c for c in shown if unicodedata.category(c) != "Cf").strip().lower()
    if not RUN_ID.fullmatch(canonical):
        raise ValueError(
            f"{text[:80]!r} is no run id; expected printable ASCII without blanks (the harness writes 32 hex "
            "digits)"
        )
    return canonical


class Measurement(NamedTuple):
    benchmark: str
    metric: str
    value: float | None
    status: str


RUN_FIELDS = ("status", "schedule", "hostname", "hosts", "reason", "image_ref", "config_hash")
"""What a run recorded beside its results that no re-serialisation changes: two files under one run id that
differ in any of them are two runs."""


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    """What a run recorded, as the store keeps it."""

    fields: Mapping[str, object]
    """RUN_FIELDS, by name."""
    results: Mapping[str, Measurement]
    """By series identity hash."""

    @classmethod
    def from_run(cls, run: ParsedRun) -> RunOutcome:
        return cls(
            {name: getattr(run, name) for name in RUN_FIELDS},
            {
                r.series.hash(): Measurement(r.series.benchmark, r.series.metric, r.value, r.status)
                for r in run.results
            },
        )

    def difference(self, other: RunOutcome) -> str | None:
        """Every field in which this outcome (here) differs from `other` (there), and the first result,
        readably; None if they agree."""
        found = [
            f"{name} {_text(self.fields.get(name))} here, {_text(other.fields.get(name))} there"
            for name in RUN_FIELDS
            if self.fields.get(name) != other.fields.get(name)
        ]
        for series in sorted(self.results.keys() | other.results.keys()):
            here, there = self.results.get(series), other.results.get(series)
            if here != there:
                named = here or there
                assert named is not None  # one of the two holds the series
                found.append(f"{named.benchmark} {named.metric}: {_shown(here)} here, {_shown(there)} there")
                break
        return "; ".join(found) or None


_BARE = re.compile(r"[\w.:/@+-]+")
"""Text shown as it is (a status, a host name); any other (a reason in words, an empty one) is quoted."""


def _text(value: object) -> str:
    if value is None:
        return "none"
    return repr(value[:60]) if isinstance(value, str) and not _BARE.fullmatch(value) else str(value)


def _shown(measurement: Measurement | None) -> str:
    if measurement is None:
        return "no result"
    value = "no value" if measurement.value is None else f"{measurement.value:.6g}"
    return f"{value} ({measurement.status})"
