"""The results store against SQLite and a real PostgreSQL server: migrations, idempotent and atomic ingest,
gaps, pytest-benchmark files, and parallel writers that lose nothing."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import multiprocessing
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, func, insert, select
from sqlalchemy.orm import Session

from jaxbench.results import commands, schema, store, synthetic, writes
from jaxbench.results.history import load_histories
from jaxbench.results.ingest import parse_file
from jaxbench.results.records import IngestError, ParsedRun

SERIES_PER_RUN = 7
"""What one synthetic run reports: step time, tokens/s (global and per device), TFLOP/s, MFU, compile
time and loss (results/synthetic.py)."""

NIGHT = dt.date(2026, 11, 1)


def count(engine: Engine, table: type[schema.Base]) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def test_migrations_create_the_schema_the_models_describe(store_url: str) -> None:
    engine = store.connect(store_url)
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), schema.Base.metadata)
    assert differences == [], "schema.py changed without a migration: alembic revision --autogenerate"
    store.upgrade(engine)  # idempotent


def test_ingest_is_idempotent(store_url: str, tmp_path: Path) -> None:
    engine = store.connect(store_url)
    path = synthetic.write(tmp_path, synthetic.run_result(NIGHT, 0.5))
    first = commands.ingest(engine, [path])
    second = commands.ingest(engine, [path])
    assert len(first.added) == 1 and second.added == [] and second.skipped == [path]
    assert count(engine, schema.Run) == 1
    assert count(engine, schema.Result) == SERIES_PER_RUN
    assert count(engine, schema.Series) == SERIES_PER_RUN


def test_run_records_components_environment_and_identity(store_url: str, tmp_path: Path) -> None:
    engine = store.connect(store_url)
    document = synthetic.run_result(NIGHT, 0.5, image_manifest=synthetic.manifest(jax_commit="1" * 40))
    commands.ingest(engine, [synthetic.write(tmp_path, document)], ci_job_url="https://ci.example/job/7")
    with store.transaction(engine) as session:
        run = session.execute(select(schema.Run)).scalar_one()
        components = {c.name: c for c in run.components}
        series = session.execute(
            select(schema.Series).where(schema.Series.metric == "perf/step_time_s")
        ).scalar_one()
        assert run.night == NIGHT and run.ci_job_url == "https://ci.example/job/7"
        assert run.image_ref == f"ghcr.io/example/jax:jax-{NIGHT}"
        assert components["jax"].commit == "1" * 40 and components["jax"].repository == synthetic.JAX_REPO
        assert (
            components["jaxlib"].version == "0.12.0" and components["nvidia-driver"].version == "580.159.03"
        )
        assert run.environment["XLA_FLAGS"].startswith("--xla_gpu_enable_latency_hiding_scheduler")
        assert (series.device_kind, series.devices_per_host, series.hosts) == ("NVIDIA H100 80GB HBM3", 8, 1)
        assert series.flavor == "jax" and series.higher_is_better is False
        assert series.settings["precision"] == "bf16" and series.settings["mesh"] == "data=1,fsdp=8,tensor=1"
        step_times = session.execute(
            select(schema.Result).where(schema.Result.series_id == series.id)
        ).scalar_one()
        assert step_times.samples is not None and len(step_times.samples) == 15  # timed steps only


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["provenance"]["devices"].pop("kind"), "provenance.devices.kind: Field required"),
        (
            lambda d: d["timing"].__setitem__("compile_s", "fast"),
            "timing.compile_s: Input should be a valid number",
        ),
        (lambda d: d.__setitem__("status", "exploded"), "status: Input should be 'ok', 'compile_error'"),
    ],
)
def test_malformed_file_is_rejected_whole(store_url: str, tmp_path: Path, edit: object, message: str) -> None:
    engine = store.connect(store_url)
    good = synthetic.write(tmp_path, synthetic.run_result(NIGHT, 0.5))
    document = synthetic.run_result(NIGHT + dt.timedelta(days=1), 0.5)
    edit(document)  # type: ignore[operator]
    bad = synthetic.write(tmp_path, document, "bad.json")
    with pytest.raises(IngestError) as error:
        commands.ingest(engine, [good, bad])
    assert str(error.value).startswith(f"{bad}: {message}")
    assert count(engine, schema.Run) == 0  # not even the good file: the batch is checked before writing


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"hello": 1}', "not a jaxbench result"),
        ("[1, 2]", "not a jaxbench result"),
    ],
)
def test_not_a_result_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(IngestError, match=message):
        commands.ingest(store.connect(f"sqlite:///{tmp_path / 's.sqlite'}"), [path])


def test_nights_without_a_run_are_gaps(store_url: str, tmp_path: Path) -> None:
    engine = store.connect(store_url)
    for offset in (0, 1, 4):
        commands.ingest(
            engine, [synthetic.write(tmp_path, synthetic.run_result(NIGHT + dt.timedelta(days=offset), 0.5))]
        )
    with engine.connect() as connection:
        nights = (
            connection.execute(select(schema.Gap.night).distinct().order_by(schema.Gap.night)).scalars().all()
        )
    assert nights == [NIGHT + dt.timedelta(days=2), NIGHT + dt.timedelta(days=3)]
    assert count(engine, schema.Gap) == 2 * SERIES_PER_RUN
    # A late run for a gap night fills it.
    commands.ingest(
        engine, [synthetic.write(tmp_path, synthetic.run_result(NIGHT + dt.timedelta(days=2), 0.5))]
    )
    with engine.connect() as connection:
        nights = connection.execute(select(schema.Gap.night).distinct()).scalars().all()
    assert nights == [NIGHT + dt.timedelta(days=3)]


def test_failed_run_marks_each_series(store_url: str, tmp_path: Path) -> None:
    engine = store.connect(store_url)
    commands.ingest(
        engine, [synthetic.write(tmp_path, synthetic.run_result(NIGHT, 0.5, status=synthetic.Status.OOM))]
    )
    with engine.connect() as connection:
        statuses = connection.execute(select(schema.Result.status, schema.Result.value)).all()
    assert statuses and all(s == ("oom", None) for s in statuses)


def test_pytest_benchmark_file(store_url: str, tmp_path: Path) -> None:
    suite = tmp_path / "test_tiny_bench.py"
    suite.write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('n', [100, 1000])\n"
        "def test_sum(benchmark, n):\n"
        "    benchmark.extra_info['gb_per_s'] = 1.5\n"
        "    benchmark.extra_info['unknown_direction'] = 3.0\n"
        "    benchmark(sum, range(n))\n"
    )
    output = tmp_path / "bench.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(suite),
            f"--benchmark-json={output}",
            "--benchmark-min-rounds=3",
            "--benchmark-max-time=0.05",
            "--rootdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        # Outside pytest-xdist, as a user runs it: pytest-benchmark times nothing when it sees these.
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    engine = store.connect(store_url)
    commands.ingest(engine, [output])
    with engine.connect() as connection:
        rows = connection.execute(
            select(schema.Series.benchmark, schema.Series.metric, schema.Series.kind)
        ).all()
    names = {(b.split("::")[-1], m) for b, m, _ in rows}
    assert names == {
        ("test_sum[100]", "perf/time_s"),
        ("test_sum[1000]", "perf/time_s"),
        ("test_sum[100]", "perf/gb_per_s"),
        ("test_sum[1000]", "perf/gb_per_s"),
    }  # the key without a declared direction is not ingested
    assert {k for _, _, k in rows} == {"microbenchmark"}


def test_pytest_benchmark_file_with_a_broken_entry(tmp_path: Path) -> None:
    document = {
        "machine_info": {},
        "datetime": "2026-11-01T02:00:00",
        "benchmarks": [{"fullname": "a", "stats": {}}],
    }
    path = tmp_path / "b.json"
    path.write_text(json.dumps(document))
    with pytest.raises(IngestError, match=r"b.json: benchmarks\[0\].stats.median: missing"):
        commands.ingest(store.connect(f"sqlite:///{tmp_path / 's.sqlite'}"), [path])


def _writer(url: str, paths: list[str]) -> None:
    commands.ingest(store.connect(url), [Path(p) for p in paths])


@pytest.mark.slow
@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-store", "migrated-store"])
def test_parallel_writers_lose_nothing(store_url: str, tmp_path: Path, fresh: bool) -> None:
    if not fresh:
        store.connect(store_url)
    writers, files_each = 4, 6
    batches = [
        [
            str(
                synthetic.write(
                    tmp_path / f"w{w}", synthetic.run_result(NIGHT + dt.timedelta(days=i), 0.5 + w)
                )
            )
            for i in range(files_each)
        ]
        for w in range(writers)
    ]
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_writer, args=(store_url, batch)) for batch in batches]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
    assert [p.exitcode for p in processes] == [0] * writers
    engine = store.connect(store_url)
    assert count(engine, schema.Run) == writers * files_each
    assert count(engine, schema.Result) == writers * files_each * SERIES_PER_RUN
    assert count(engine, schema.Series) == SERIES_PER_RUN  # every writer's runs share the same series


def test_job_link_from_github_actions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "org/jaxbench")
    monkeypatch.setenv("GITHUB_RUN_ID", "123")
    engine = store.connect(f"sqlite:///{tmp_path / 's.sqlite'}")
    commands.ingest(engine, [synthetic.write(tmp_path, synthetic.run_result(NIGHT, 0.5))])
    with engine.connect() as connection:
        assert (
            connection.execute(select(schema.Run.ci_job_url)).scalar()
            == "https://github.com/org/jaxbench/actions/runs/123"
        )


def test_flags_belong_to_the_series_identity(tmp_path: Path) -> None:
    engine = store.connect(f"sqlite:///{tmp_path / 's.sqlite'}")
    paths = []
    for day, identity in enumerate(["a" * 64, "a" * 64, "b" * 64]):
        document = synthetic.run_result(NIGHT + dt.timedelta(days=day), 0.5)
        document["flags"] = {
            "profile": "hopper",
            "xla_flags": f"--x={identity[0]}",
            "xla": {},
            "env": {},
            "dropped": [],
            "identity": identity,
        }
        paths.append(synthetic.write(tmp_path, document))
    commands.ingest(engine, paths)
    assert count(engine, schema.Series) == 2 * SERIES_PER_RUN  # the flag change started new histories


def test_the_backend_is_recorded_and_a_non_native_run_starts_its_own_series(
    store_url: str, tmp_path: Path
) -> None:
    engine = store.connect(store_url)
    native = synthetic.run_result(NIGHT, 0.5)
    maxtext = synthetic.run_result(NIGHT, 0.6, backend="maxtext")
    commands.ingest(engine, [synthetic.write(tmp_path, native), synthetic.write(tmp_path, maxtext)])
    with engine.connect() as connection:
        rows = connection.execute(select(schema.Series.backend, schema.Series.metric)).all()
    assert len(rows) == 2 * SERIES_PER_RUN  # same recipe, hardware and settings: only the backend differs
    assert {m for b, m in rows if b == "native"} == {m for b, m in rows if b == "maxtext"}
    with store.transaction(engine) as session:
        backends = {h.identity.backend for h in load_histories(session)}
    assert backends == {"native", "maxtext"}  # read back into the identities
    assert count(engine, schema.Run) == 2


def test_series_stored_before_backends_existed_are_native(store_url: str, tmp_path: Path) -> None:
    """Upgrading a store at the first schema: its series become native, with their identity hashes, and the
    same run ingested afterwards joins them instead of starting new series."""
    engine = store.connect(store_url, migrate=False)
    store.upgrade(engine, "0001")
    run = parse_file(synthetic.write(tmp_path, synthetic.run_result(NIGHT, 0.5)))
    with engine.begin() as connection:
        for result in run.results:
            canonical = result.series.canonical()
            row = {"identity_hash": result.series.hash(), **canonical.pop("hardware"), **canonical}
            connection.execute(insert(schema.Series.__table__).values(**row))  # the 0001 columns only
    store.upgrade(engine)
    with engine.connect() as connection:
        assert set(connection.execute(select(schema.Series.backend)).scalars()) == {"native"}
    commands.ingest(engine, [synthetic.write(tmp_path, synthetic.run_result(NIGHT, 0.5))])
    assert count(engine, schema.Series) == SERIES_PER_RUN and count(engine, schema.Result) == SERIES_PER_RUN


def test_a_failed_run_of_an_unknown_family_names_the_family_field(tmp_path: Path) -> None:
    document = synthetic.run_result(NIGHT, 0.5, status=synthetic.Status.OOM)
    document["recipe"]["family"] = "mamba"
    path = synthetic.write(tmp_path, document)
    with pytest.raises(IngestError) as error:
        parse_file(path)
    message = str(error.value)
    assert message.startswith(f"{path}: recipe.family: 'mamba'")
    assert "['gpt3', 'llama2', 'vit']" in message


def test_a_failed_run_expects_its_familys_throughput_unit(tmp_path: Path) -> None:
    document = synthetic.run_result(NIGHT, 0.5, recipe="vit-base", status=synthetic.Status.OOM)
    metrics = {r.series.metric for r in parse_file(synthetic.write(tmp_path, document)).results}
    assert "perf/images_per_s" in metrics and "perf/tokens_per_s" not in metrics


def test_writers_of_crossing_batches_neither_deadlock_nor_fail(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ingests whose batches create the same two series in opposite orders, each pausing after its
    first run until the other has written one too (or a second has passed): on PostgreSQL each would then
    wait for the series the other created, a deadlock that aborts one, unless the writers take turns."""
    engine = store.connect(store_url)

    def batch(folder: str, night: dt.date, names: tuple[str, str]) -> list[Path]:
        return [synthetic.write(tmp_path / folder, synthetic.run_result(night, 0.5, recipe=n)) for n in names]

    batches = [
        batch("a", NIGHT, ("llama2-7b", "gpt3-5b")),
        batch("b", NIGHT + dt.timedelta(days=1), ("gpt3-5b", "llama2-7b")),
    ]
    both_wrote_one = threading.Barrier(2, timeout=1.0)
    write_runs = writes.write_runs

    def pausing_write_runs(session: Session, runs: Sequence[ParsedRun]) -> list[int | None]:
        """Each run written on its own, the writer pausing after its first."""
        run_ids = []
        for index, run in enumerate(runs):
            run_ids += write_runs(session, [run])
            if index == 0:
                with contextlib.suppress(threading.BrokenBarrierError):  # the other writer waits its turn
                    both_wrote_one.wait()
        return run_ids

    monkeypatch.setattr(writes, "write_runs", pausing_write_runs)
    failures: list[BaseException] = []

    def ingest(batch: list[Path]) -> None:
        try:
            commands.ingest(engine, batch)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=ingest, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert count(engine, schema.Run) == 4 and count(engine, schema.Series) == 2 * SERIES_PER_RUN
