"""jaxbench from Python: run a recipe and get its result; open a store and read its series, runs and
incidents as records, or as pandas DataFrames where pandas is installed. Reading never writes: incidents
are those the last `jaxbench detect` stored.

    from jaxbench import api
    result = api.run("llama2", size="tiny", steps=12)      # a RunResult, as the result file holds it
    store = api.open_store()                               # JAXBENCH_DB, as the command line
    store.incidents(state="open"), store.frame("runs")    # records; a pandas.DataFrame

Reference: docs/api.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from jaxbench.harness.runtime.options import DEFAULT_BACKEND, RunOptions, Schedule

if TYPE_CHECKING:
    import pandas
    from sqlalchemy import Engine

    from jaxbench.harness.runtime.result import RunResult


def run(
    recipe: str,
    *,
    size: str | None = None,
    steps: int | None = None,
    overrides: tuple[str, ...] = (),
    backend: str = DEFAULT_BACKEND,
    out_dir: Path = Path("runs"),
) -> RunResult:
    """Train `recipe` (a name such as "llama2", or a recipe file) in this process, as `jaxbench run` does
    with the local launcher, and return its result; the result file is written to `out_dir` and not
    ingested. A run that fails (OOM, NaN, compile error) is a result with that status; invalid input raises
    core.errors.InvalidInput before anything runs."""
    # Imported here: the store reader below should not load jax.
    from jaxbench.harness.run.runner import execute
    from jaxbench.harness.runtime.reporter import SilentReporter

    options = RunOptions(
        recipe, size=size, steps=steps, overrides=tuple(overrides), out_dir=out_dir, backend=backend
    )
    result, _ = execute(options, SilentReporter())
    return result


@dataclasses.dataclass(frozen=True)
class SeriesRecord:
    key: str
    """The series' stable key (as in reports and the dashboard's URLs)."""
    benchmark: str
    metric: str
    unit: str
    higher_is_better: bool
    hardware: str
    backend: str
    flavor: str
    settings: dict[str, str | int | float | bool | None]
    nights: tuple[dt.date, ...]
    values: tuple[float | None, ...]
    """One value a night (the median of the night's valid runs); None where the night failed or ran not."""
    statuses: tuple[str, ...]
    """"ok", the failure's status (e.g. "oom"), or "gap"."""


@dataclasses.dataclass(frozen=True)
class RunRecord:
    id: int
    night: dt.date
    schedule: str
    status: str
    reason: str | None
    recipe: str | None
    """Family and size ("llama2-1b"); None for a microbenchmark or build run."""
    backend: str | None
    """Who trained it ("native", "maxtext", ...), as its results' series name it."""
    hosts: int
    started_at: dt.datetime | None
    image_ref: str | None
    components: dict[str, str | None]
    """Component name -> commit (or version where no commit is known)."""


@dataclasses.dataclass(frozen=True)
class IncidentRecord:
    id: int
    kind: str
    """"throughput", "correctness", "validity" or "size"."""
    state: str
    night: dt.date
    """The first bad night."""
    hardware: str
    last_good_run_id: int | None
    first_bad_run_id: int | None
    details: dict[str, Any]
    """Series and magnitudes, component ranges and flag changes, as `jaxbench detect` stored them."""


Table = Literal["series", "runs", "incidents"]


@dataclasses.dataclass(frozen=True)
class Store:
    """A results store, read-only. `open_store` makes one."""

    engine: Engine

    def series(self) -> list[SeriesRecord]:
        from sqlalchemy.orm import Session

        from jaxbench.results.history import load_histories

        with Session(self.engine) as session:
            histories = load_histories(session)
        return [
            SeriesRecord(
                **h.identity.described(),
                settings=dict(h.identity.settings),
                nights=tuple(n.night for n in h.nights),
                values=tuple(n.value for n in h.nights),
                statuses=tuple(n.status for n in h.nights),
            )
            for h in histories
        ]

    def runs(self, *, schedule: Schedule | str | None = None) -> list[RunRecord]:
        """Every stored run, oldest night first (`schedule`: "nightly" or "ad-hoc" only)."""
        from sqlalchemy import select
        from sqlalchemy.orm import Session, selectinload

        from jaxbench.results import schema

        query = select(schema.Run).options(selectinload(schema.Run.components)).order_by(schema.Run.night)
        if schedule is not None:
            query = query.where(schema.Run.schedule == Schedule(schedule).value)
        # A run's backend is its series' (each result names it), not a column of the run.
        backends = (
            select(schema.Result.run_id, schema.Series.backend)
            .join(schema.Series, schema.Series.id == schema.Result.series_id)
            .distinct()
        )
        with Session(self.engine) as session:
            backend_of = dict(session.execute(backends).tuples().all())
            return [_run_record(row, backend_of.get(row.id)) for row in session.execute(query).scalars()]

    def incidents(self, *, state: str | None = None, kind: str | None = None) -> list[IncidentRecord]:
        """The incidents the last `jaxbench detect` stored, newest night first."""
        from sqlalchemy import select
        from sqlalchemy.orm import Session

        from jaxbench.results import schema

        query = select(schema.Incident).order_by(schema.Incident.night.desc(), schema.Incident.id)
        if state is not None:
            query = query.where(schema.Incident.state == state)
        if kind is not None:
            query = query.where(schema.Incident.kind == kind)
        with Session(self.engine) as session:
            return [
                IncidentRecord(
                    row.id,
                    row.kind,
                    row.state,
                    row.night,
                    row.hardware,
                    row.last_good_run_id,
                    row.first_bad_run_id,
                    dict(row.details),
                )
                for row in session.execute(query).scalars()
            ]

    def frame(self, table: Table) -> pandas.DataFrame:
        """`series` (one row per series and night), `runs` or `incidents` as a DataFrame. Needs pandas
        (`pip install 'jaxbench[pandas]'`)."""
        try:
            import pandas
        except ImportError as missing:
            from jaxbench.core.errors import InvalidInput

            raise InvalidInput(
                "Store.frame needs pandas: pip install 'jaxbench[pandas]' (or pandas); the records are "
                "Store.series(), .runs() and .incidents()"
            ) from missing
        if table == "series":
            rows = [
                {
                    **_fields(s, exclude={"nights", "values", "statuses"}),
                    "night": night,
                    "value": value,
                    "status": status,
                }
                for s in self.series()
                for night, value, status in zip(s.nights, s.values, s.statuses, strict=True)
            ]
        elif table == "runs":
            rows = [_fields(r) for r in self.runs()]
        elif table == "incidents":
            rows = [_fields(i) for i in self.incidents()]
        else:
            raise ValueError(f"table: expected series, runs or incidents, got {table!r}")
        return pandas.DataFrame(rows)


def open_store(url: str | None = None) -> Store:
    """The store at `url` (a SQLAlchemy URL; default JAXBENCH_DB, as the command line), its schema brought
    up to date first as `jaxbench` does."""
    from jaxbench.results import store

    return Store(store.connect(url))


def _run_record(row: Any, backend: str | None) -> RunRecord:
    config = row.config if isinstance(row.config, dict) else {}
    family, size = config.get("family"), config.get("size")
    return RunRecord(
        id=row.id,
        night=row.night,
        schedule=row.schedule,
        status=row.status,
        reason=row.reason,
        recipe=f"{family}-{size}" if family and size else None,
        backend=backend,
        hosts=row.hosts,
        started_at=row.started_at,
        image_ref=row.image_ref,
        components={c.name: c.commit or c.version for c in row.components},
    )


def _fields(record: object, exclude: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    return {
        field.name: getattr(record, field.name)
        for field in dataclasses.fields(record)  # type: ignore[arg-type]
        if field.name not in exclude
    }
