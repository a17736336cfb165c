"""What the fault suite (tests/results/test_faults.py) needs around a killed `jaxbench` command: starting and
killing it, a copy of a store to run it uninterrupted on, and the checks of what a kill left behind: the
store's integrity, the runs and the judgement it holds, and whether a dashboard folder is a whole site.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q -p no:cacheprovider tests/results/test_faults.py
"""

from __future__ import annotations

import dataclasses
import hashlib
import html.parser
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, exists, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from jaxbench.results import schema
from jaxbench.results.report.html import MARKER, STATIC, plotly_js
from tests.conftest import REPO
from tests.support.kill_points import KILL_ENV, KillPoint

HOOK = Path(__file__).resolve().parent / "fault_hook"
"""Holds the sitecustomize.py that arms a kill point in the command (tests/support/kill_points.py)."""
COMMAND_TIMEOUT_S = 120


@dataclasses.dataclass(frozen=True)
class Kill:
    point: KillPoint | float
    """Where the command was killed: a kill point, or seconds after it started."""
    killed: bool
    """False where a timed kill came after the command had finished."""


def command_environment(url: str, point: KillPoint | None = None) -> dict[str, str]:
    paths = [str(HOOK), str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "JAXBENCH_DB": url, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.pathsep.join(paths)}
    if point is not None:
        env[KILL_ENV] = point.to_env()
    return env


def jaxbench_killed(args: Sequence[str], url: str, point: KillPoint | float) -> Kill:
    """`python -m jaxbench ARGS` on the store at `url`, SIGKILLed at `point`: a kill point, which must come
    (the command finishing first means it did other work than the run its points were chosen from), or a
    time after the start, which may come after the end."""
    armed = point if isinstance(point, KillPoint) else None
    process = subprocess.Popen(
        [sys.executable, "-m", "jaxbench", *args],
        cwd=REPO,
        env=command_environment(url, armed),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = process.communicate(timeout=point if isinstance(point, float) else COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        _, stderr = process.communicate()
    killed = process.returncode == -signal.SIGKILL
    if armed and not killed:
        raise AssertionError(
            f"jaxbench {' '.join(args)}: {armed} never came (exit {process.returncode})\n{stderr}"
        )
    return Kill(point, killed)


# --- stores -------------------------------------------------------------------------------------------------


def _is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


@contextmanager
def plain_engine(url: str) -> Iterator[Engine]:
    """An engine to look at a store with: not the store's own (results/store.py), which would migrate a store
    whose state is under test."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        yield engine
    finally:
        engine.dispose()


@contextmanager
def store_copy(url: str, folder: Path) -> Iterator[str]:
    """A copy of the store at `url`: a SQLite file's online backup into `folder`, or a PostgreSQL database
    made from it as a template and dropped afterwards."""
    parsed = make_url(url)
    if _is_sqlite(url):
        copy = folder / f"copy-of-{Path(str(parsed.database)).name}"
        with (
            closing(sqlite3.connect(str(parsed.database))) as source,
            closing(sqlite3.connect(copy)) as target,
        ):
            source.backup(target)
        yield f"sqlite:///{copy}"
        return
    name = f"{parsed.database}_copy"
    admin = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as connection:
        # A command run in this process leaves its engine's pooled connection open, and a template must have
        # none.
        connection.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :name AND pid <> pg_backend_pid()"
            ),
            {"name": parsed.database},
        )
        connection.execute(text(f"CREATE DATABASE {name} TEMPLATE {parsed.database}"))
    try:
        yield parsed.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()


def check_integrity(url: str) -> dict[str, int]:
    """Fail unless the store is intact: SQLite's own integrity and foreign key checks; on either database,
    every row of every table read back and no row pointing at a missing one. Returns each table's rows."""
    if _is_sqlite(url):
        with closing(sqlite3.connect(str(make_url(url).database))) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
    rows = {}
    with plain_engine(url) as engine, engine.connect() as connection:
        for table in schema.Base.metadata.sorted_tables:
            rows[table.name] = len(connection.execute(select(table)).all())
            for key in table.foreign_keys:
                target = key.column
                orphans = connection.execute(
                    select(func.count())
                    .select_from(table)
                    .where(key.parent.is_not(None), ~exists().where(target == key.parent))
                ).scalar_one()
                assert orphans == 0, f"{orphans} rows of {table.name}.{key.parent.name} name no {target}"
    return rows


def stored_run_ids(url: str) -> Counter[str]:
    """How many runs the store holds under each run id."""
    with plain_engine(url) as engine, engine.connect() as connection:
        return Counter(str(uid) for uid in connection.execute(select(schema.Run.run_uid)).scalars())


@dataclasses.dataclass(frozen=True)
class Judgement:
    """What `jaxbench detect` stored, without what each computation stamps anew (times, and the ids that
    PostgreSQL's sequences hand out even to a transaction that rolls back)."""

    incidents: frozenset[tuple[Any, ...]]
    change_points: tuple[tuple[Any, ...], ...]


def stored_judgement(url: str) -> Judgement:
    incident, point = schema.Incident, schema.ChangePointRow
    with plain_engine(url) as engine, engine.connect() as connection:
        incidents = connection.execute(
            select(
                incident.fingerprint,
                incident.kind,
                incident.state,
                incident.hardware,
                incident.night,
                incident.last_good_run_id,
                incident.first_bad_run_id,
                incident.details,
            )
        ).all()
        points = connection.execute(
            select(
                point.series_id,
                point.night,
                point.detector,
                point.magnitude,
                point.pvalue,
                point.mean_before,
                point.mean_after,
            )
        ).all()
    return Judgement(
        frozenset((*row[:-1], json.dumps(row[-1], sort_keys=True)) for row in incidents),
        tuple(sorted(tuple(row) for row in points)),
    )


# --- dashboards ---------------------------------------------------------------------------------------------


def site_files(folder: Path) -> dict[str, str]:
    """Each file of a site (its path in the site) and the sha256 of its bytes."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def site_shape(folder: Path) -> Counter[str]:
    """How many files each folder of a site holds ("." for its top): what a site of one store's data has,
    whatever ids PostgreSQL gave its incidents."""
    return Counter(str(Path(name).parent) for name in site_files(folder))


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [value for name, value in attrs if name in ("href", "src") and value]


ELSEWHERE = ("https://", "http://", "#", "mailto:", "data:")
"""Links that point out of the site (compare links, CI jobs) or within a page."""


def check_whole_site(folder: Path) -> None:
    """Fail unless `folder` is a whole dashboard: marked as one, its assets as shipped, every page written to
    its end and every link between its pages leading to a file of it."""
    assert (folder / MARKER).is_file() and (folder / "index.html").is_file(), f"{folder}: no marker or index"
    for asset in (plotly_js(), STATIC / "dashboard.js", STATIC / "dashboard.css"):
        assert (folder / "assets" / asset.name).read_bytes() == asset.read_bytes(), f"{folder}: {asset.name}"
    for page in folder.rglob("*.html"):
        content = page.read_text(encoding="utf-8")
        assert content.rstrip().endswith("</html>"), f"{page}: cut short"
        parser = _Links()
        parser.feed(content)
        for link in parser.links:
            if not link.startswith(ELSEWHERE):
                target = (page.parent / link.split("#")[0]).resolve()
                assert target.is_file() and target.is_relative_to(folder.resolve()), f"{page}: {link}"


def debris(folder: Path) -> list[str]:
    """What a dashboard build leaves beside its folder: staging folders and previous sites set aside."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))
