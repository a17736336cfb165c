"""The nightly's triage hand-off: the night's slots go to incidents a triage can take up; one refused before
any run (a microbenchmark's series, a component it cannot rerun) is said in one line and takes none.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/nightly/test_nightly_triage_slots.py
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.nightly import triage as nightly_triage
from jaxbench.triage.commands import TriageOptions

# incident id -> what its triage does: refused before any run, fails on the way, or runs
OUTCOMES = {1: "refused", 2: "refused", 3: "fails", 4: "runs", 5: "runs"}


@pytest.fixture
def triaged(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    taken: list[int] = []
    monkeypatch.setattr(
        nightly_triage.triage_records,
        "open_incidents",
        lambda engine, kinds: [(i, f"f{i}") for i in OUTCOMES],
    )
    monkeypatch.setattr(nightly_triage.triage_records, "latest_triage", lambda engine, fingerprint: None)

    def triage_incident(
        engine: object, incident: str, options: object, console: object, post: object
    ) -> None:
        outcome = OUTCOMES[int(incident)]
        if outcome == "refused":
            raise InvalidInput(f"incident {incident}: a microbenchmark series; triage reruns recipes only")
        taken.append(int(incident))
        if outcome == "fails":
            raise ExternalFailure(f"incident {incident}: the stack did not install")

    monkeypatch.setattr(nightly_triage, "triage_incident", triage_incident)
    return taken


def test_refused_incidents_take_none_of_the_nights_slots(triaged: list[int]) -> None:
    out = io.StringIO()
    started = nightly_triage.hand_off(
        None,  # type: ignore[arg-type]
        None,
        TriageOptions(),
        Console(file=out, width=200),
        max_incidents=2,
    )
    assert started == 2 and triaged == [3, 4]  # a triage that ran and failed did take its slot
    lines = out.getvalue().splitlines()
    assert [line for line in lines if "microbenchmark" in line] == [
        "triage of incident 1: incident 1: a microbenchmark series; triage reruns recipes only",
        "triage of incident 2: incident 2: a microbenchmark series; triage reruns recipes only",
    ]
    assert "triage: incident 5 waits for the next night (--incidents)" in lines
