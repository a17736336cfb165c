"""What ingest takes: measurements a run can have made (results/physical.py), series names in plain ASCII
(results/identity.py: text_problems), and only regular files within a size bound (results/ingest.py). Each
refusal is one line naming the file and the field, exit 1, with nothing written.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_physical_validity.py
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode
from jaxbench.results import commands, ingest, physical, schema, store, synthetic
from jaxbench.results.records import IngestError
from tests.conftest import REPO

NIGHT = dt.date(2026, 11, 1)
Document = dict[str, Any]


def run_document(step_time: float = 0.5) -> Document:
    return synthetic.run_result(NIGHT, step_time)


def benchmark_document(**extra_info: float) -> Document:
    return {
        "machine_info": {"node": "bench-host", "python_version": "3.12.1"},
        "datetime": "2026-11-01T02:00:00",
        "benchmarks": [
            {
                "fullname": "tests/t.py::test_a",
                "stats": {"median": 0.1, "iqr": 0.01, "data": [0.09, 0.1, 0.11]},
                "extra_info": extra_info,
            }
        ],
    }


def write_json(path: Path, document: Document) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def refused(path: Path, message: str) -> None:
    """Ingest refuses `path` with `message` (a regex after "PATH: ") and the store stays empty."""
    engine = store.connect()
    with pytest.raises(IngestError, match=rf"^{re.escape(str(path))}: {message}"):
        commands.ingest(engine, [path])
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(schema.Run)).scalar_one() == 0


# --- measurements a run can have made ---------------------------------------------------------------------


def _zero_median(document: Document) -> str:
    document["timing"]["step_time_s"]["median"] = 0
    return r"timing\.step_time_s\.median: expected a time in s from 1e-12 to 1e\+06, got 0$"


def _negative_step_time(document: Document) -> str:
    document["metrics"][0]["value"] = -0.018
    return (
        r"metrics\[0\]\.value: expected a value in s from 1e-12 to 1e\+06 for the store's results\.value, "
        r"got -0\.018 \(perf/step_time_s\)$"
    )


def _negative_raw_step(document: Document) -> str:
    document["timing"]["raw_step_times_s"][7] = -0.5
    return r"timing\.raw_step_times_s\[7\]: expected a time in s from 1e-12 to 1e\+06, got -0\.5$"


def _tiny_step_time(document: Document) -> str:
    document["metrics"][0]["value"] = 1e-300
    return r"metrics\[0\]\.value: expected a value in s from 1e-12 .* got 1e-300 \(perf/step_time_s\)$"


def _huge_throughput(document: Document) -> str:
    document["metrics"][1]["value"] = 1e300
    return r"metrics\[1\]\.value: expected a value in tokens/s from 0 to 1e\+12 .* got 1e\+300"


def _negative_devices(document: Document) -> str:
    document["provenance"]["devices"]["local_count"] = -8
    return (
        r"provenance\.devices\.local_count: expected at least 1 device for the store's "
        r"series\.devices_per_host, got -8$"
    )


def _no_hosts(document: Document) -> str:
    document["provenance"]["devices"]["process_count"] = 0
    return r"provenance\.devices\.process_count: expected at least 1 host for the store's runs\.hosts, got 0$"


def _finished_before_started(document: Document) -> str:
    document["finished_at"] = "2026-11-01T01:00:00+00:00"
    return (
        r"finished_at: expected a time at or after started_at \(2026-11-01T02:00:00\+00:00\) for the store's "
        r"runs\.finished_at, got 2026-11-01T01:00:00\+00:00$"
    )


def _finished_before_started_without_offset(document: Document) -> str:
    document["finished_at"] = "2026-11-01T01:59:59"  # UTC, as results write it: no TypeError comparing
    return r"finished_at: expected a time at or after started_at"


@pytest.mark.parametrize(
    "edit",
    [
        _zero_median,
        _negative_step_time,
        _negative_raw_step,
        _tiny_step_time,
        _huge_throughput,
        _negative_devices,
        _no_hosts,
        _finished_before_started,
        _finished_before_started_without_offset,
    ],
)
def test_a_measurement_no_run_can_make_is_refused_by_field(
    tmp_path: Path, edit: Callable[[Document], str]
) -> None:
    document = run_document()
    message = edit(document)
    refused(write_json(tmp_path / "run.json", document), message)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["benchmarks"][0]["stats"]["data"].__setitem__(1, -0.1),
            r"benchmarks\[0\]\.stats\.data: expected samples in s from 1e-12 .* got \[1\] -0\.1$",
        ),
        (
            lambda d: d["benchmarks"][0]["extra_info"].update(tflops=-3.0),
            r"benchmarks\[0\] \(results\.value\): expected a value in TFLOP/s from 0 to 1e\+06, got -3 "
            r"\(perf/tflops\)$",
        ),
        (
            lambda d: d["benchmarks"][0]["stats"].update(iqr=-0.01),
            r"benchmarks\[0\] \(results\.spread\): expected a relative spread from 0 to 1e\+06, got -0\.1",
        ),
    ],
    ids=["negative-sample", "negative-tflops", "negative-spread"],
)
def test_a_pytest_benchmark_measurement_out_of_bounds_is_refused(
    tmp_path: Path, edit: Callable[[Document], None], message: str
) -> None:
    document = benchmark_document()
    edit(document)
    refused(write_json(tmp_path / "bench.json", document), message)


def test_every_metric_the_harness_declares_has_bounds_that_hold_its_real_values(tmp_path: Path) -> None:
    """The bounds keep out what no run can measure, never a real run: a synthetic nightly result, its
    pytest-benchmark and build-record units included, passes."""
    from jaxbench.harness.measure.metrics import METRICS
    from jaxbench.results.pytest_benchmark import EXTRA_INFO_METRICS

    units = {m.unit for m in METRICS.values()} | {u for _, u, _ in EXTRA_INFO_METRICS.values()}
    assert units <= set(physical.UNIT_BOUNDS), "a unit without bounds: add it to results/physical.py"
    paths = [
        write_json(tmp_path / "run.json", run_document(0.25)),
        write_json(tmp_path / "bench.json", benchmark_document(tflops=312.0, fraction_of_peak=0.6)),
    ]
    assert len(commands.ingest(store.connect(), paths).added) == 2


# --- series names in plain ASCII --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("llama2\u200b-7b", r"U\+200B ZERO WIDTH SPACE at 6"),
        ("llam\u0430-7b", r"U\+0430 CYRILLIC SMALL LETTER A at 4"),
        ("llama2-7b\n", r"U\+000A .* at 9"),
    ],
    ids=["zero-width-space", "cyrillic-a", "newline"],
)
def test_a_recipe_name_that_only_looks_like_one_is_refused(tmp_path: Path, name: str, shown: str) -> None:
    document = run_document()
    document["recipe"]["name"] = name
    refused(
        write_json(tmp_path / "run.json", document),
        rf"recipe\.name: expected a plain name \(letters, digits, .*\) for the store's series\.benchmark, "
        rf"got .*: {shown}$",
    )


def test_a_backend_device_or_test_id_outside_ascii_is_refused(tmp_path: Path) -> None:
    document = run_document()
    document["backend"] = "nat\u0456ve"
    refused(write_json(tmp_path / "backend.json", document), r"backend: expected a plain name")
    document = run_document()
    document["provenance"]["devices"]["kind"] = "NVIDIA H100\u00a080GB"
    refused(
        write_json(tmp_path / "device.json", document),
        r"provenance\.devices\.kind: expected plain printable ASCII .* U\+00A0 NO-BREAK SPACE",
    )
    bench = benchmark_document()
    bench["benchmarks"][0]["fullname"] = "tests/t.py::test_\u0430"
    refused(
        write_json(tmp_path / "bench.json", bench), r"benchmarks\[0\]\.fullname: expected plain printable"
    )


# --- only regular files, within a size bound --------------------------------------------------------------


def _ingest_exit(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["ingest", str(path)])
    return code, capsys.readouterr().err


def test_a_device_is_refused_before_it_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _ingest_exit(Path("/dev/zero"), capsys)
    assert code == ExitCode.INVALID_INPUT
    assert err.strip().endswith("/dev/zero: a character device; expected a regular file")


@pytest.mark.slow
def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """In a process of its own: before the bound, opening the pipe waited for a writer forever."""
    fifo = tmp_path / "result.json"
    os.mkfifo(fifo)
    environment = {
        **os.environ,
        "JAXBENCH_DB": f"sqlite:///{tmp_path / 'store.sqlite'}",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "jaxbench", "ingest", str(fifo)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert done.returncode == ExitCode.INVALID_INPUT, done.stderr
    assert done.stderr.strip().endswith(f"{fifo}: a named pipe; expected a regular file")


def test_a_folder_named_like_a_result_is_refused(tmp_path: Path) -> None:
    (tmp_path / "results" / "odd.json").mkdir(parents=True)
    with pytest.raises(IngestError, match=r"odd\.json: a folder; expected a regular file$"):
        commands.ingest(store.connect(), commands.result_files([tmp_path / "results"], allow_empty=False))


def test_a_file_over_the_bound_is_refused_unread(tmp_path: Path) -> None:
    """A sparse file four times the bound: refused from its size, without reading (tracemalloc sees the
    memory Python allocates: before the bound, the whole file)."""
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(4 * ingest.MAX_RESULT_BYTES)
    tracemalloc.start()
    try:
        with pytest.raises(
            IngestError, match=rf"^{big}: 67,108,864 bytes; expected at most 16,777,216 bytes$"
        ):
            ingest.read_result_file(big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20


def test_a_string_over_the_bound_is_refused_by_field(tmp_path: Path) -> None:
    document = run_document()
    document["provenance"]["env"]["XLA_FLAGS"] = "--xla_a=1 " * 10_000
    refused(
        write_json(tmp_path / "long.json", document),
        r"provenance\.env\.XLA_FLAGS: expected text of at most 65,536 characters, got 100,000$",
    )
