"""The results database: raw measurements (runs, components, results, gaps) apart from derived judgements
(change points, incidents), so that every judgement can be recomputed from the measurements.

Changes to these tables go through an Alembic migration (results/migrations/versions/).

    jaxbench ingest runs/*.json && jaxbench detect
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import JSON, Date, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from jaxbench.harness.runtime.options import LEGACY_SCHEDULE, NATIVE_BACKEND


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[float]: JSON, list[Any]: JSON}


# --- raw measurements ------------------------------------------------------------------------------------


class Series(Base):
    """One history: what breaks it (benchmark, number-changing settings, hardware, flavor, backend,
    metric)."""

    __tablename__ = "series"

    id: Mapped[int] = mapped_column(primary_key=True)
    identity_hash: Mapped[str] = mapped_column(String(64), unique=True)
    """sha256 of the canonical JSON of every identity field below."""
    benchmark: Mapped[str] = mapped_column(String(200))
    """Recipe (family-size, e.g. llama2-7b) or microbenchmark (micro/NAME[PARAMS] for ours, else the
    pytest-benchmark fullname)."""
    kind: Mapped[str] = mapped_column(String(20))
    """"recipe" or "microbenchmark"."""
    settings: Mapped[dict[str, Any]] = mapped_column()
    """The resolved settings that change the numbers (precision, batch, sequence, mesh, attention, flags)."""
    device_kind: Mapped[str] = mapped_column(String(200))
    devices_per_host: Mapped[int] = mapped_column(Integer)
    hosts: Mapped[int] = mapped_column(Integer)
    flavor: Mapped[str] = mapped_column(String(100))
    """Image flavor (e.g. "jax", "maxtext"), or "native" outside our images."""
    metric: Mapped[str] = mapped_column(String(100))
    unit: Mapped[str] = mapped_column(String(40))
    higher_is_better: Mapped[bool] = mapped_column()
    backend: Mapped[str] = mapped_column(String(40), server_default=NATIVE_BACKEND)
    """Who trained the recipe: "native" (jaxbench's own models, every microbenchmark, and every series
    stored before backends existed), "maxtext", "levanter", ..."""

    results: Mapped[list[Result]] = relationship(back_populates="series")

    __table_args__ = (Index("ix_series_benchmark_metric", "benchmark", "metric"),)


class Run(Base):
    """One execution: what must not break a history (image, date, job link, hosts, timestamps)."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    source_hash: Mapped[str] = mapped_column(String(64), unique=True)
    """sha256 of the ingested file's canonical JSON (in runs stored before that: of its bytes), so that the
    same run written again with other indentation or key order adds nothing."""
    source_kind: Mapped[str] = mapped_column(String(30))
    """"harness" (jaxbench result JSON) or "pytest-benchmark"."""
    run_uid: Mapped[str | None] = mapped_column(String(64), index=True)
    """The run's own id (a harness result's run_id; none for pytest-benchmark files and build records): the
    same run ingested again adds nothing, another result under a stored run id is refused (`ingest` in
    results/commands.py)."""
    schedule: Mapped[str] = mapped_column(String(20), server_default=LEGACY_SCHEDULE.value)
    """"nightly" (a run of the nightly plan: judged) or "ad-hoc" (by hand: only reported); every run stored
    before schedules existed is a nightly one."""
    night: Mapped[dt.date] = mapped_column(Date, index=True)
    program: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """The compiled step: fingerprint, summary and XLA cost (harness/runtime/result.py: Program), so that an
    incident can say whether its first bad run compiled the same program as its last good one."""
    profile: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """Where a profiled run's time went (harness/runtime/result.py: Profile), for incidents to compare."""
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    image_ref: Mapped[str | None] = mapped_column(String(300))
    image_digest: Mapped[str | None] = mapped_column(String(100))
    ci_job_url: Mapped[str | None] = mapped_column(String(500))
    hostname: Mapped[str | None] = mapped_column(String(200))
    hosts: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(30))
    reason: Mapped[str | None] = mapped_column(Text)
    config_hash: Mapped[str | None] = mapped_column(String(64))
    """Hash of the full resolved configuration (steps, seed, optimizer ...), to flag configuration changes."""
    config: Mapped[dict[str, Any]] = mapped_column()
    environment: Mapped[dict[str, Any]] = mapped_column()
    """XLA_FLAGS and the other performance-relevant environment variables."""
    loss_curve: Mapped[list[Any] | None] = mapped_column()
    """Loss at every step (null where not finite), for the correctness checks."""
    loss_optimum: Mapped[float | None] = mapped_column(Float)
    ingested_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))

    components: Mapped[list[Component]] = relationship(back_populates="run", cascade="all, delete-orphan")
    results: Mapped[list[Result]] = relationship(back_populates="run", cascade="all, delete-orphan")


class Component(Base):
    """A piece of the stack a run used: jax, jaxlib, xla, flax, transformer-engine, CUDA, driver, ..."""

    __tablename__ = "components"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    repository: Mapped[str | None] = mapped_column(String(300))
    commit: Mapped[str | None] = mapped_column(String(64))
    version: Mapped[str | None] = mapped_column(String(100))

    run: Mapped[Run] = relationship(back_populates="components")

    __table_args__ = (UniqueConstraint("run_id", "name"),)


class Result(Base):
    """One metric of one run: the summary value, its raw samples and spread, or why there is none."""

    __tablename__ = "results"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), index=True)
    value: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[list[float] | None] = mapped_column()
    spread: Mapped[float | None] = mapped_column(Float)
    """Within-run spread: interquartile range of the samples, relative to the value."""
    status: Mapped[str] = mapped_column(String(30))
    reason: Mapped[str | None] = mapped_column(Text)

    run: Mapped[Run] = relationship(back_populates="results")
    series: Mapped[Series] = relationship(back_populates="results")

    __table_args__ = (UniqueConstraint("run_id", "series_id"),)


class Gap(Base):
    """A night on which a series that ran before had no run (recorded at ingest, not inferred later)."""

    __tablename__ = "gaps"

    id: Mapped[int] = mapped_column(primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), index=True)
    night: Mapped[dt.date] = mapped_column(Date)

    __table_args__ = (UniqueConstraint("series_id", "night"),)


# --- derived judgements (recomputed by `jaxbench detect`) --------------------------------------------------


class ChangePointRow(Base):
    __tablename__ = "change_points"

    id: Mapped[int] = mapped_column(primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), index=True)
    night: Mapped[dt.date] = mapped_column(Date)
    """First night after the change."""
    magnitude: Mapped[float] = mapped_column(Float)
    pvalue: Mapped[float] = mapped_column(Float)
    mean_before: Mapped[float] = mapped_column(Float)
    mean_after: Mapped[float] = mapped_column(Float)
    detector: Mapped[str] = mapped_column(String(30))
    computed_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class Incident(Base):
    """What moved in one night on one hardware class. Identified by a fingerprint that survives
    recomputation, so human verdicts stay attached."""

    __tablename__ = "incidents"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(30))
    state: Mapped[str] = mapped_column(String(20))
    hardware: Mapped[str] = mapped_column(String(300))
    night: Mapped[dt.date] = mapped_column(Date)
    last_good_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    first_bad_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    details: Mapped[dict[str, Any]] = mapped_column()
    """Series and magnitudes, component ranges and flag/env changes, as computed."""
    computed_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class Verdict(Base):
    """A person's judgement of an incident; kept by fingerprint across recomputations."""

    __tablename__ = "verdicts"

    id: Mapped[int] = mapped_column(primary_key=True)
    incident_fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    verdict: Mapped[str] = mapped_column(String(30))
    author: Mapped[str | None] = mapped_column(String(200))
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


# --- a person's decision on a run (jaxbench runs) --------------------------------------------------------


class RunDecision(Base):
    """A person's decision on one run, kept like a verdict: quarantined (left out of every judgement, its rows
    kept), released (judged again), or deleted (its rows removed; this record stays, so that the file is
    not ingested again). The newest quarantine or release of a run is in force."""

    __tablename__ = "run_decisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(Integer, index=True)
    """The run's id; no foreign key: the record of a deletion outlives its run."""
    run_uid: Mapped[str | None] = mapped_column(String(64), index=True)
    source_hash: Mapped[str] = mapped_column(String(64), index=True)
    """The run's, so that a deleted run is known again by its content as by its run id."""
    decision: Mapped[str] = mapped_column(String(20))
    """"quarantine", "release" or "delete" (results/quarantine.py: Decision)."""
    author: Mapped[str | None] = mapped_column(String(200))
    note: Mapped[str | None] = mapped_column(Text)
    """Why."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


# --- triage: reruns of an incident's stacks (jaxbench triage) ----------------------------------------------


class Triage(Base):
    """One triage of an incident: what it set out to do and, once finished, what it found. Kept by the
    incident's fingerprint, which survives `jaxbench detect` recomputing the incidents."""

    __tablename__ = "triages"

    id: Mapped[int] = mapped_column(primary_key=True)
    incident_fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    state: Mapped[str] = mapped_column(String(20))
    """running (or interrupted: resumable), finished, stopped (a bound was reached), failed."""
    plan: Mapped[dict[str, Any]] = mapped_column()
    """The incident's kind, benchmark, the two stacks' pins and the settings the triage ran with."""
    outcome: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    """The process running the triage now (host, pid and a random token: results/triage_lease.py); None
    while none does. Only the owner records runs and the outcome."""
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    """Until when the owner's lease holds unless renewed; past it, another process may take the triage up."""

    runs: Mapped[list[TriageRun]] = relationship(
        back_populates="triage", cascade="all, delete-orphan", order_by="TriageRun.id"
    )


class TriageRun(Base):
    """One benchmark run a triage made: which stack (label) and which repeat of it, and what it measured.
    A resumed triage replays these instead of running them again."""

    __tablename__ = "triage_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    triage_id: Mapped[int] = mapped_column(ForeignKey("triages.id", ondelete="CASCADE"), index=True)
    label: Mapped[str] = mapped_column(String(300))
    """The stack: "good", "bad", "<component>@<commit>" or "<component>=first-bad"."""
    attempt: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(30))
    median_step_s: Mapped[float | None] = mapped_column(Float)
    loss_curve: Mapped[list[Any] | None] = mapped_column()
    loss_optimum: Mapped[float | None] = mapped_column(Float)
    program: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    reason: Mapped[str | None] = mapped_column(Text)
    result_path: Mapped[str | None] = mapped_column(String(500))
    seconds: Mapped[float] = mapped_column(Float)
    cpu_per_wall: Mapped[float | None] = mapped_column(Float)
    """CPU seconds per wall second of the run's timed steps: a run starved of CPU is left out."""
    median_cpu_step_s: Mapped[float | None] = mapped_column(Float)
    """Median CPU seconds per timed step, where the step computes on the CPU (the other clock a triage may
    time by)."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))

    triage: Mapped[Triage] = relationship(back_populates="runs")

    __table_args__ = (UniqueConstraint("triage_id", "label", "attempt"),)
