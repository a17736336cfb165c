"""One triage of an incident at a time (results/triage_lease.py): a second is refused in one line before any
run, also with --restart; one whose process died is taken up once its lease runs out; and a process that
lost its triage can write nothing more, not even into the triage that replaced it under the same id.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/triage/test_triage_lease.py
"""

from __future__ import annotations

import datetime as dt
import io
import os
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import Engine

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.main import main
from jaxbench.results import schema, store, triage_lease, triage_records
from jaxbench.results.triage_lease import LEASE_S, LeaseLost
from jaxbench.triage.commands import TriageOptions, triage_incident
from jaxbench.triage.stacks import Measurement
from tests.triage.test_triage_store import BAD, GOOD, add_incident

FINGERPRINT = "f00d" * 16
T0 = triage_lease.utc_now()
"""Now, as record_run and finish_triage read the clock to renew a lease."""
LATER = T0 + dt.timedelta(days=1)
"""When any lease taken in a test has run out: record_run renews a lease from the real clock, which has moved
on from T0 (taken when pytest collected this module, minutes earlier under pytest-xdist)."""
FIELDS: dict[str, Any] = {"status": "ok", "median_step_s": 0.01, "loss_curve": None, "loss_optimum": None}
FIELDS |= {"program": None, "reason": None, "result_path": None, "seconds": 7.0}


@pytest.fixture
def engine(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Engine:
    """SQLite and PostgreSQL (conftest's store_url), also as JAXBENCH_DB for the command."""
    monkeypatch.setenv("JAXBENCH_DB", store_url)
    return store.connect(store_url)


def start(engine: Engine, owner: str, *, restart: bool = False, now: dt.datetime = T0) -> int:
    return triage_records.start_triage(engine, FINGERPRINT, {}, restart=restart, owner=owner, now=now).id


def row(engine: Engine, triage_id: int) -> schema.Triage:
    with store.transaction(engine) as session:
        found = session.get(schema.Triage, triage_id)
        assert found is not None
        session.expunge(found)
        return found


def runs(engine: Engine, triage_id: int) -> list[str]:
    stored = triage_records.latest_triage(engine, FINGERPRINT)
    assert stored is not None and stored.id == triage_id
    return [label for label, _ in stored.runs]


@pytest.mark.parametrize("restart", [False, True])
def test_a_second_triage_of_a_running_incident_is_refused(engine: Engine, restart: bool) -> None:
    first = start(engine, "host-a pid 1 aaaa")
    triage_records.record_run(engine, first, "good", 0, FIELDS, owner="host-a pid 1 aaaa")
    with pytest.raises(InvalidInput, match=r"triage \d+ of it is running \(host-a pid 1 aaaa\); wait for it"):
        start(engine, "host-b pid 2 bbbb", restart=restart, now=T0 + dt.timedelta(seconds=10))
    # The first goes on as if nothing happened: no collision on its next run, its outcome its own.
    triage_records.record_run(engine, first, "bad", 0, FIELDS, owner="host-a pid 1 aaaa")
    triage_records.finish_triage(engine, first, "finished", {"culprit": "c"}, owner="host-a pid 1 aaaa")
    assert runs(engine, first) == ["good", "bad"] and row(engine, first).lease_owner is None


def test_the_command_refuses_it_in_one_line_before_any_run(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    incident = add_incident(engine)
    held = triage_records.start_triage(engine, FINGERPRINT, {}, restart=False, owner="host-a pid 1 aaaa")
    started: list[object] = []
    monkeypatch.setattr("jaxbench.triage.commands.run_triage", lambda *args, **kwargs: started.append(args))
    code = main(["triage", str(incident), "--work", str(tmp_path / "work")])
    err = capsys.readouterr().err.strip()
    assert code == ExitCode.INVALID_INPUT and len(err.splitlines()) == 1, err
    assert "is running (host-a pid 1 aaaa)" in err
    assert started == [] and not (tmp_path / "work").exists()
    assert row(engine, held.id).lease_owner == "host-a pid 1 aaaa" and runs(engine, held.id) == []


def test_a_triage_whose_lease_ran_out_is_taken_up_and_its_old_owner_writes_nothing(engine: Engine) -> None:
    first = start(engine, "a")
    triage_records.record_run(engine, first, "good", 0, FIELDS, owner="a")
    taken = start(engine, "b", now=LATER)  # process a stopped renewing: it died, or hangs
    assert taken == first and runs(engine, taken) == ["good"]
    with pytest.raises(LeaseLost, match="another process took it over"):
        triage_records.record_run(engine, first, "bad", 0, FIELDS, owner="a")
    with pytest.raises(LeaseLost):
        triage_records.finish_triage(engine, first, "finished", {"culprit": "a's"}, owner="a")
    triage_records.record_run(engine, taken, "bad", 0, FIELDS, owner="b")
    assert runs(engine, taken) == ["good", "bad"]
    assert row(engine, taken).state == "running" and row(engine, taken).outcome is None


def test_a_restart_is_never_finished_by_the_process_it_replaced(engine: Engine) -> None:
    first = start(engine, "a")
    restarted = start(engine, "b", restart=True, now=LATER)
    # SQLite gives the new triage the deleted one's id: only the owner token tells them apart.
    with pytest.raises(LeaseLost):
        triage_records.finish_triage(engine, first, "finished", {"culprit": "a's"}, owner="a")
    assert row(engine, restarted).state == "running" and row(engine, restarted).outcome is None
    triage_records.finish_triage(engine, restarted, "finished", {"culprit": "b's"}, owner="b")
    assert row(engine, restarted).outcome == {"culprit": "b's"}


def test_an_interrupted_triage_lets_go_at_once(engine: Engine) -> None:
    first = start(engine, "a")
    with pytest.raises(KeyboardInterrupt), triage_lease.lease_kept(engine, first, "a"):
        raise KeyboardInterrupt
    assert row(engine, first).lease_owner is None and row(engine, first).state == "running"
    assert start(engine, "b") == first  # resumed, not refused


def test_a_running_triage_renews_its_lease(engine: Engine) -> None:
    first = start(engine, "a")
    beats = iter(T0 + dt.timedelta(seconds=s) for s in range(1, 10**6))
    with triage_lease.lease_kept(engine, first, "a", every_s=0.01, clock=lambda: next(beats)):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            expires = row(engine, first).lease_expires_at
            assert expires is not None
            if expires.replace(tzinfo=dt.UTC) > T0 + dt.timedelta(seconds=LEASE_S + 2):
                break
            time.sleep(0.01)
        else:
            pytest.fail("the lease was never renewed")
    assert row(engine, first).lease_owner is None


def test_the_store_keeps_no_lease_across_processes_by_accident() -> None:
    # Two processes of one host get different owners, and each owner names its host and pid.
    owner = triage_lease.new_owner()
    assert f"pid {os.getpid()} " in owner and owner != triage_lease.new_owner()


class FakeBench:
    """Runs that take no time: the first bad commit is 30 % slower, every commit after it too."""

    def __init__(self, work: Path, **kwargs: Any) -> None:
        self.calls = 0

    def __call__(self, label: str, pins: dict[str, str], attempt: int) -> Measurement:
        slow = any(commit == BAD for commit in pins.values())
        step_s = (0.13 if slow else 0.1) * (1 + 0.001 * (attempt % 3))
        return Measurement("ok", median_step_s=step_s, cpu_per_wall=1.0)


def test_a_whole_triage_records_under_its_lease_and_lets_go_at_the_end(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    incident = add_incident(engine)
    monkeypatch.setattr("jaxbench.triage.commands.Benchmark", FakeBench)
    monkeypatch.setattr("jaxbench.triage.commands.Mirrors", lambda root, releases: lambda move: [GOOD, BAD])
    options = TriageOptions(work=tmp_path / "work")
    code = triage_incident(engine, str(incident), options, Console(file=io.StringIO()), None)
    assert code == ExitCode.OK
    stored = triage_records.latest_triage(engine, FINGERPRINT)
    assert stored is not None and stored.state == "finished" and stored.outcome is not None
    assert stored.outcome["culprit"] == BAD and len(stored.runs) == stored.outcome["runs"]
    assert row(engine, stored.id).lease_owner is None
