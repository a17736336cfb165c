"""`jaxbench backfill` end to end on the CPU, offline: two releases of optax in a local wheelhouse (the
installed optax, built as two versions here), each run for real with the harness on its release night and
ingested as a backfilled night; a second call resumes and runs nothing again, a bound stops one early.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/backfill/test_backfill_command.py
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import optax
import pytest
from sqlalchemy import select

from jaxbench.core.errors import ExitCode
from jaxbench.main import main
from jaxbench.results import schema, store
from tests.support.wheels import package_wheel

NIGHTS = {
    "0.2.91": dt.datetime(2026, 6, 1, 9, tzinfo=dt.UTC),
    "0.2.92": dt.datetime(2026, 6, 15, 9, tzinfo=dt.UTC),
}


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed optax as wheels of two versions, each file dated its release."""
    out = tmp_path_factory.mktemp("wheelhouse")
    for version, uploaded in NIGHTS.items():
        project = tmp_path_factory.mktemp(f"optax-{version}")
        wheel = package_wheel(Path(optax.__file__).parent, "optax", version, project, out)
        os.utime(wheel, (uploaded.timestamp(), uploaded.timestamp()))
    return out


def backfill(wheelhouse: Path, work: Path, *more: str) -> int:
    command = ["backfill", "optax", "0.2.91..0.2.92", "--index", str(wheelhouse), "--work", str(work)]
    return main([*command, "--recipes", "llama2:tiny", *more])


@pytest.mark.slow
def test_each_release_runs_on_its_night_and_a_second_call_resumes(
    wheelhouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("JAXBENCH_DB", url)
    assert backfill(wheelhouse, tmp_path / "work") == ExitCode.OK
    with store.connect(url).connect() as connection:
        runs = connection.execute(select(schema.Run.id, schema.Run.night, schema.Run.schedule)).all()
        optax_versions = dict(
            connection.execute(
                select(schema.Component.run_id, schema.Component.version).where(
                    schema.Component.name == "optax"
                )
            ).all()
        )
    assert sorted((night, schedule) for _, night, schedule in runs) == [
        (uploaded.date(), "backfill") for uploaded in NIGHTS.values()
    ]
    by_night = {night: optax_versions[run_id] for run_id, night, _ in runs}
    assert by_night == {
        uploaded.date(): version for version, uploaded in NIGHTS.items()
    }  # what ran, recorded
    ledger = json.loads((tmp_path / "work" / "ledger.json").read_text())
    assert {v: n["state"] for v, n in ledger["nights"].items()} == {"0.2.91": "ran", "0.2.92": "ran"}
    assert all(
        n["step_ms"]["llama2:tiny"] > 0 and n["stack"]["optax"] == v for v, n in ledger["nights"].items()
    )

    capsys.readouterr()
    assert backfill(wheelhouse, tmp_path / "work") == ExitCode.OK  # resumed: nothing left to run
    assert "2 done before" in capsys.readouterr().out
    with store.connect(url).connect() as connection:
        assert len(connection.execute(select(schema.Run.id)).all()) == 2


@pytest.mark.slow
def test_a_bound_stops_a_backfill_that_the_next_call_finishes(
    wheelhouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("JAXBENCH_DB", url)
    assert (
        backfill(wheelhouse, tmp_path / "work", "--max-versions", "1", "--repeats", "2")
        == ExitCode.INCOMPLETE
    )
    out = capsys.readouterr().out
    assert "0.2.91 (2026-06-01): ran" in out and "--max-versions 1 reached" in out and "0.2.92 (" not in out
    assert backfill(wheelhouse, tmp_path / "work") == ExitCode.OK
    assert "0.2.92 (2026-06-15): ran" in capsys.readouterr().out
    # --repeats 2: both runs of the first night are in the store, and the ledger holds their median.
    ledger = json.loads((tmp_path / "work" / "ledger.json").read_text())["nights"]
    assert len(ledger["0.2.91"]["run_ids"]) == 2 and len(ledger["0.2.92"]["run_ids"]) == 1
    with store.connect(url).connect() as connection:
        nights = connection.execute(select(schema.Run.night).order_by(schema.Run.night)).scalars().all()
        steps = (
            connection.execute(
                select(schema.Result.value)
                .join(schema.Series)
                .where(schema.Result.run_id.in_(ledger["0.2.91"]["run_ids"]))
                .where(schema.Series.metric == "perf/step_time_s")
            )
            .scalars()
            .all()
        )
    assert nights == [dt.date(2026, 6, 1), dt.date(2026, 6, 1), dt.date(2026, 6, 15)]
    values = [float(value) for value in steps if value is not None]
    assert len(values) == 2
    assert ledger["0.2.91"]["step_ms"]["llama2:tiny"] == pytest.approx(1e3 * sum(values) / 2, abs=1e-3)


def test_bad_input_is_one_line_before_any_install(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["backfill", "optax", "0.2.92..0.2.91", "--work", str(tmp_path / "w")]) == ExitCode.INVALID_INPUT
    )
    assert "FROM..TO '0.2.92..0.2.91': 0.2.92 comes after 0.2.91" in capsys.readouterr().err
    assert main(["backfill", "xla", "0.6.0..0.7.0", "--index", str(tmp_path)]) == ExitCode.INVALID_INPUT
    assert "component 'xla': no published releases" in capsys.readouterr().err
    assert main(["backfill", "optax", "1.0..2.0", "--index", str(tmp_path)]) == ExitCode.INVALID_INPUT
    assert f"optax: no release from 1.0 to 2.0 on {tmp_path}" in capsys.readouterr().err
    assert main(["backfill", "optax", "1.0..2.0", "--recipes", "llama9"]) == ExitCode.INVALID_INPUT
    assert "--recipes: llama9: no recipe 'llama9'" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


@pytest.mark.slow
def test_a_release_that_does_not_run_is_a_gap_with_its_reason_and_can_be_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JAXBENCH_DB", f"sqlite:///{tmp_path / 'store.sqlite'}")
    broken = tmp_path / "src" / "optax"
    shutil.copytree(Path(optax.__file__).parent, broken, ignore=shutil.ignore_patterns("__pycache__"))
    (broken / "__init__.py").write_text("raise ImportError('this release is broken on purpose')\n")
    wheels = tmp_path / "wheels"
    package_wheel(broken, "optax", "0.2.99", tmp_path / "project", wheels)
    command = ["backfill", "optax", "0.2.99..0.2.99", "--index", str(wheels), "--work", str(tmp_path / "w")]
    assert main([*command, "--repeats", "3"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert (
        "  0.2.99 (" in out
        and "gap: llama2:tiny" in out
        and "ImportError: this release is broken on purpose" in out
    )
    # A run that fails is not repeated: it would fail alike, and the gap says so once.
    assert out.count("broken on purpose") == 2  # the night's line and the summary table
    assert [p.name for p in (tmp_path / "w" / "runs" / "0.2.99").iterdir()] == ["llama2-tiny"]
    assert main(command) == ExitCode.OK
    assert "  0.2.99 (" not in capsys.readouterr().out  # a gap is not run again...
    assert main([*command, "--retry-gaps"]) == ExitCode.OK
    assert "  0.2.99 (" in capsys.readouterr().out  # ...unless asked
