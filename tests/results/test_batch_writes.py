"""Ingest writes a batch of files in a handful of statements (results/writes.py): the gaps a batch makes
are those its files would make written one by one, in any order (results/gaps.py), and the statements an
ingest executes do not grow with its files. A deterministic budget, unlike a stopwatch: writing one file at
a time (7 statements each, 16,666 files of a backfill at 835 results/s) fails it.
"""

from __future__ import annotations

import datetime as dt
import io
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from sqlalchemy import Engine, select

from benchmarks.self.counts import statements
from jaxbench.results import commands, schema, store, synthetic, writes
from jaxbench.results.gaps import batch_gaps

NIGHT = dt.date(2026, 3, 1)


def gaps_between_measured(
    measured: list[tuple[int, dt.date]], stored: dict[int, set[dt.date]]
) -> set[tuple[int, dt.date]]:
    """The reference, by another road: every unmeasured night whose nearest measured nights (stored or
    in the batch) on either side include one of the batch's."""
    batch: dict[int, set[dt.date]] = {}
    for series, night in measured:
        batch.setdefault(series, set()).add(night)
    gaps = set()
    for series, nights in batch.items():
        every = nights | stored.get(series, set())
        day = min(every)
        while day < max(every):
            if day not in every:
                below = max(n for n in every if n < day)
                above = min(n for n in every if n > day)
                if below in nights or above in nights:
                    gaps.add((series, day))
            day += dt.timedelta(days=1)
    return gaps


series_nights = st.tuples(st.integers(0, 2), st.integers(0, 20).map(lambda d: NIGHT + dt.timedelta(days=d)))


@settings(max_examples=300, deadline=None)
@given(measured=st.lists(series_nights, max_size=12, unique=True), stored=st.lists(series_nights, max_size=6))
def test_a_batch_makes_gaps_between_its_nights_and_their_nearest_measured_ones(
    measured: list[tuple[int, dt.date]], stored: list[tuple[int, dt.date]]
) -> None:
    """In any order of the batch: gaps the store held before stay as they were (an insert that conflicts
    does nothing), and a night the batch measures is never one."""
    by_series: dict[int, set[dt.date]] = {}
    for series, night in stored:
        by_series.setdefault(series, set()).add(night)

    def nearest(side: int) -> dict[tuple[int, dt.date], dt.date]:
        found = {}
        for series, night in measured:
            beyond = [n for n in by_series.get(series, set()) if (n - night).days * side > 0]
            if beyond:
                found[(series, night)] = min(beyond, key=lambda n: abs((n - night).days))
        return found

    gaps = batch_gaps(measured, nearest(-1), nearest(+1))
    assert gaps == gaps_between_measured(measured, by_series)
    assert gaps == batch_gaps(list(reversed(measured)), nearest(-1), nearest(+1))
    assert not gaps & set(measured)


def gap_rows(engine: Engine) -> list[tuple[int, dt.date]]:
    with engine.connect() as connection:
        return sorted(connection.execute(select(schema.Gap.series_id, schema.Gap.night)).tuples())


@pytest.mark.parametrize(
    "offsets",
    [[0, 1, 4, 5, 9, 12], [0, 1, 4, 5, 9, 12, 13, 15, 18, 22, 23, 26, 30]],
    ids=["nights-one-by-one", f"more-than-{writes.BULK_NIGHTS}-nights-at-once"],
)
def test_one_ingest_of_shuffled_files_stores_what_ingests_of_one_file_each_do(
    tmp_path: Path, offsets: list[int]
) -> None:
    """The real store, two ways: the same files (nights with holes, two recipes) shuffled, in two batches,
    and one ingest per file in night order. The same gaps: files written one at a time out of order used to
    miss the gaps before a later night's run. A batch of many nights finds its stored neighbours in one read
    (writes.BULK_NIGHTS), a smaller one night by night: both must agree with one file at a time."""
    files = [
        synthetic.write(tmp_path / "files", synthetic.run_result(NIGHT + dt.timedelta(days=o), 0.5, recipe=r))
        for o in offsets
        for r in ("llama2-7b", "gpt3-5b")
    ]
    batched = store.connect(f"sqlite:///{tmp_path / 'batched.sqlite'}")
    shuffled = list(files)
    random.Random(3).shuffle(shuffled)
    commands.ingest(batched, shuffled[:3])  # part of the history stored before the rest comes at once
    commands.ingest(batched, shuffled[3:])
    single = store.connect(f"sqlite:///{tmp_path / 'single.sqlite'}")
    for path in files:
        commands.ingest(single, [path])
    assert gap_rows(batched) == gap_rows(single)
    assert {night for _, night in gap_rows(single)} == {
        NIGHT + dt.timedelta(days=d) for d in range(offsets[-1]) if d not in offsets
    }


@pytest.mark.parametrize("nights", [1, 3])
def test_the_statements_of_an_ingest_do_not_grow_with_its_files(tmp_path: Path, nights: int) -> None:
    """10 and 40 files over the same nights: the same statements (executemany counts once); a distinct
    night costs three (the series' nearest stored nights on either side, the gaps it fills)."""
    executed = []
    for files in (10, 40):
        engine = store.connect(f"sqlite:///{tmp_path / f'{files}.sqlite'}")
        paths = [
            synthetic.write(
                tmp_path / str(files),
                synthetic.run_result(NIGHT + dt.timedelta(days=i % nights), 0.5, recipe=f"llama2-{i}b"),
            )
            for i in range(files)
        ]
        with statements(engine) as executing:
            summary = commands.ingest(engine, paths)
        assert len(summary.added) == files
        executed.append(len(executing))
    assert executed[0] == executed[1]
    assert executed[1] <= 12 + 3 * nights


def test_a_large_ingest_prints_its_summary_alone_and_a_small_one_each_file_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAXBENCH_DB", f"sqlite:///{tmp_path / 's.sqlite'}")
    paths = [
        synthetic.write(tmp_path / "runs", synthetic.run_result(NIGHT, 0.5, recipe=f"llama2-{i}b"))
        for i in range(commands.LISTED_FILES + 5)
    ]

    def printed(files: list[Path]) -> list[str]:
        screen = io.StringIO()
        options = commands.IngestOptions(tuple(files), None, None, False)
        assert commands.ingest_files(options, Console(file=screen, width=300)) == 0
        return screen.getvalue().splitlines()

    few = printed(paths[:2])
    assert [line.split(" (run")[0] for line in few[:2]] == [f"ingested {p}" for p in paths[:2]]
    assert few[2].startswith("ingest: 2 added, 0 already in the store (2 files into sqlite:///")
    many = printed(paths)
    assert len(many) == 1 and many[0].startswith(f"ingest: {len(paths) - 2} added, 2 already in the store (")
