"""`jaxbench` as a user runs it, in a subprocess: output, exit codes, and results on interruption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from jaxbench.results import schema, store
from tests.conftest import REPO


def jaxbench(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxbench", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        **kwargs,  # type: ignore[call-overload]
    )


def results_in(directory: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


@pytest.mark.slow
def test_run_prints_the_table_and_writes_the_result(tmp_path: Path) -> None:
    done = jaxbench("run", "gpt3", "--steps", "7", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    for row in (
        "gpt3-tiny",
        "step time (median of 2)",
        "tokens/s (global)",
        "model TFLOP/s per device",
        "MFU",
    ):
        assert row in done.stdout
    [result] = results_in(tmp_path)
    assert result["status"] == "ok" and result["recipe"]["resolved"]["train"]["steps"] == 7
    assert str(tmp_path) in done.stdout
    # The run lands in the configured store (the tests' JAXBENCH_DB) by default, as a run by hand: ad hoc.
    assert "ingested into sqlite:///" in done.stdout
    assert result["schedule"] == "ad-hoc"
    with store.connect().connect() as connection:
        stored = connection.execute(select(schema.Run.run_uid, schema.Run.schedule)).all()
    assert [tuple(r) for r in stored] == [(result["run_id"], "ad-hoc")]


@pytest.mark.slow
def test_no_ingest(tmp_path: Path) -> None:
    done = jaxbench("run", "llama2", "--steps", "6", "--no-ingest", "--nightly", "--out", str(tmp_path))
    assert done.returncode == 0 and "ingested" not in done.stdout
    [result] = results_in(tmp_path)
    assert result["schedule"] == "nightly"  # a run of the nightly plan (jaxbench run --nightly)
    with store.connect().connect() as connection:
        assert connection.execute(select(schema.Run)).all() == []


def test_invalid_input_fails_fast_without_a_result(tmp_path: Path) -> None:
    start = time.monotonic()
    done = jaxbench("run", "llama2", "--set", "train.global_batch=12", "--out", str(tmp_path))
    elapsed = time.monotonic() - start
    assert done.returncode == 1
    assert "train.global_batch (12) must be divisible by the 8 shards of the batch" in done.stderr
    assert "compiling" not in done.stderr
    assert results_in(tmp_path) == []
    assert elapsed < 30  # importing jax dominates; nothing is compiled


def test_steps_flag_is_named_in_errors(tmp_path: Path) -> None:
    done = jaxbench("run", "vit", "--steps", "3", "--out", str(tmp_path))
    assert done.returncode == 1
    assert "--steps 3: train: Value error, warmup_steps (5) must be smaller than steps (3)" in done.stderr


@pytest.mark.slow
def test_fp8_on_cpu_is_a_clear_error(tmp_path: Path) -> None:
    done = jaxbench("run", "llama2", "--set", "train.precision=fp8", "--out", str(tmp_path))
    assert done.returncode == 1
    assert "train.precision: fp8 needs an NVIDIA GPU with FP8 tensor cores" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "name"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")])
def test_interruption_writes_a_result(tmp_path: Path, sig: signal.Signals, name: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "jaxbench", "run", "llama2", "--steps", "100000", "--out", str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert process.stderr is not None and process.stdout is not None
    try:
        for line in process.stderr:  # the harness announces the end of compilation
            if line.startswith("compiled in"):
                break
        # Keep reading both pipes, so that the run never waits on a full one while it writes its result.
        for pipe in (process.stdout, process.stderr):
            threading.Thread(target=pipe.read, daemon=True).start()
        time.sleep(1.0)  # let some steps run
        process.send_signal(sig)
        process.wait(timeout=60)
    finally:
        process.kill()  # a no-op once it has exited; never left training 100,000 steps after a failure
    assert process.returncode == 130
    [result] = results_in(tmp_path)
    assert result["status"] == "interrupted"
    assert result["reason"] == f"interrupted by {name} during train"
    assert len(result["loss"]["per_step"]) > 0


def test_recipes_lists_every_size() -> None:
    done = jaxbench("recipes")
    assert done.returncode == 0
    for family, size in [("llama2", "70b"), ("gpt3", "175b"), ("vit", "h14"), ("vit", "tiny")]:
        assert family in done.stdout and size in done.stdout


@pytest.mark.slow
def test_flops_json() -> None:
    done = jaxbench("flops", "llama2", "--size", "7b", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["data"]
    assert report["parameters"] == 6_738_415_616
    assert report["training_flops_per_unit"] == pytest.approx(4.2864e10, rel=1e-4)
    longer = json.loads(jaxbench("flops", "llama2", "--size", "7b", "--seq", "8192", "--json").stdout)["data"]
    assert longer["training_flops_per_unit"] > report["training_flops_per_unit"]


@pytest.mark.slow
def test_flops_for_vit_counts_images_and_refuses_seq() -> None:
    done = jaxbench("flops", "vit", "--size", "b16")
    assert done.returncode == 0 and "training FLOPs per image: 1.05" in done.stdout
    refused = jaxbench("flops", "vit", "--seq", "512")
    assert (
        refused.returncode == 1 and "--seq: a ViT's sequence length follows from image_size" in refused.stderr
    )
