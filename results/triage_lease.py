"""Who may write a triage: one process at a time holds its lease, an owner token and an expiry on the triage's
row, taken in the transaction that starts or resumes it and renewed while it runs. Every run recorded and
the outcome are written only where the row still names this owner, so a second triage of one incident is
refused at the start instead of colliding with the first's runs, and a process that lost its triage (taken
over after its lease ran out, or restarted) can never write into the one that replaced it, whatever id the
store gave that one.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/triage/test_triage_lease.py
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from jaxbench.core.errors import ExitCode, InvalidInput, JaxbenchError
from jaxbench.results import schema, store

LEASE_S = 300.0
"""How long a lease holds unless renewed: a triage whose process died is taken up this long after its last
sign of life at most."""
HEARTBEAT_S = 30.0
"""How often a running triage renews its lease (a run may take an hour; ten beats fit in one lease)."""

Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaseLost(JaxbenchError):
    """This process no longer holds the triage it runs: it stops, writing nothing more to the store."""

    exit_code = ExitCode.INCOMPLETE


def new_owner() -> str:
    """An owner token that also says who holds the lease, for the refusal another process shows."""
    return f"{socket.gethostname()[:100]} pid {os.getpid()} {uuid.uuid4().hex[:16]}"


def _utc(moment: dt.datetime) -> dt.datetime:
    """SQLite hands back the UTC times it was given without their zone."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def refuse_if_held(session: Session, fingerprint: str, owner: str, now: dt.datetime) -> None:
    """InvalidInput while another process's lease on a triage of this incident holds."""
    held = session.execute(
        select(schema.Triage).where(
            schema.Triage.incident_fingerprint == fingerprint,
            schema.Triage.lease_owner.is_not(None),
            schema.Triage.lease_owner != owner,
        )
    ).scalars()
    for row in held:
        if row.lease_expires_at is not None and _utc(row.lease_expires_at) > now:
            left_s = (_utc(row.lease_expires_at) - now).total_seconds()
            raise InvalidInput(
                f"incident {fingerprint[:12]}: triage {row.id} of it is running ({row.lease_owner}); "
                "wait for it to end or stop it, then run this again (a triage whose process died is taken "
                f"up once its lease runs out, within {left_s:.0f} s)"
            )


def take(row: schema.Triage, owner: str, now: dt.datetime) -> None:
    """The lease of `row` to `owner`, in the caller's transaction (after refuse_if_held)."""
    row.lease_owner, row.lease_expires_at = owner, now + dt.timedelta(seconds=LEASE_S)


def renew(session: Session, triage_id: int, owner: str, now: dt.datetime) -> None:
    """The lease of triage `triage_id` renewed in the caller's transaction, or LeaseLost where `owner` no
    longer holds it: what was about to be written in that transaction is not."""
    renewed = session.connection().execute(
        update(schema.Triage)
        .where(schema.Triage.id == triage_id, schema.Triage.lease_owner == owner)
        .values(lease_expires_at=now + dt.timedelta(seconds=LEASE_S))
    )
    if renewed.rowcount != 1:
        raise LeaseLost(
            f"triage {triage_id}: another process took it over or restarted it (this one's lease ran "
            "out); this one stops, and its last run is not recorded"
        )


def release(engine: Engine, triage_id: int, owner: str) -> None:
    """Let go of the lease, if `owner` still holds it: the triage stays as it is, resumable at once."""
    with store.transaction(engine) as session:
        session.connection().execute(
            update(schema.Triage)
            .where(schema.Triage.id == triage_id, schema.Triage.lease_owner == owner)
            .values(lease_owner=None, lease_expires_at=None)
        )


@contextlib.contextmanager
def lease_kept(
    engine: Engine, triage_id: int, owner: str, *, every_s: float = HEARTBEAT_S, clock: Clock = utc_now
) -> Iterator[None]:
    """The lease renewed every `every_s` inside (a thread: the triage waits on its runs), and let go on the
    way out, however it comes (finished, interrupted, failed)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                with store.transaction(engine) as session:
                    renew(session, triage_id, owner, clock())
            except LeaseLost:
                return  # the triage's next write says so
            except Exception:  # the store may answer at the next beat
                continue

    thread = threading.Thread(target=beat, name=f"triage-{triage_id}-lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        # A store that fails here lets the lease run out instead.
        with contextlib.suppress(Exception):
            release(engine, triage_id, owner)
