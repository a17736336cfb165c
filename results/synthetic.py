"""Synthetic jaxbench result documents: valid run results with chosen numbers (step time, status, loss curve,
flags, image manifest, backend, schedule, a real recipe's workload), built through the real result models so
that they always match the schema, and pytest-benchmark files as our microbenchmark suites write them. For the
tests, the store benchmark and `jaxbench demo` (results/demo.py); nothing here runs a model. Pure: the same
arguments give the same document (but for a run id left to chance).

    .venv/bin/python benchmarks/store_speed.py --results 600 --series 20 --nights 30
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxbench.harness.measure.metrics import METRICS, throughput_metric
from jaxbench.harness.measure.stats import summarize
from jaxbench.harness.provenance.record import DeviceInfo, GitInfo, GpuDriver, ImageInfo, Provenance, Versions
from jaxbench.harness.runtime.options import Schedule
from jaxbench.harness.runtime.result import (
    Loss,
    Memory,
    MetricValue,
    Parallelism,
    Profile,
    Program,
    RecipeRecord,
    RunResult,
    Status,
    Throughput,
    Timing,
)

JAX_REPO = "https://github.com/jax-ml/jax"
XLA_REPO = "https://github.com/openxla/xla"


def manifest(jax_commit: str = "a" * 40, xla_commit: str = "b" * 40, flavor: str = "jax") -> dict[str, Any]:
    return {
        "flavor": flavor,
        "components": {
            "jax": {"repository": JAX_REPO, "commit": jax_commit, "version": "0.12.0"},
            "xla": {"repository": XLA_REPO, "commit": xla_commit},
        },
    }


@dataclasses.dataclass(frozen=True)
class Workload:
    """A real recipe's side of a synthetic run (results/demo.py reads it from recipes/): its resolved settings
    and their hash, what one step trains, the device's dense peak and the data's optimal loss. Without one, a
    run is the fixed llama-like stand-in of the tests."""

    resolved: dict[str, Any]
    config_hash: str
    unit: str
    """"token" or "image"."""
    units_per_step: int
    flops_per_unit: float
    peak_tflops_per_device: float
    loss_optimum: float


def provenance(
    night: dt.date,
    *,
    device_kind: str = "NVIDIA H100 80GB HBM3",
    devices: int = 8,
    xla_flags: str = "--xla_gpu_enable_latency_hiding_scheduler=true",
    image_manifest: dict[str, Any] | None = None,
    flavor: str = "jax",
    hostname: str = "node-1",
) -> Provenance:
    """The stack and machine of a run on `night`: the nightly image of that night, of `flavor`."""
    return Provenance(
        versions=Versions(
            python="3.12.1",
            jax="0.12.0",
            jaxlib="0.12.0",
            cuda_plugin=None,
            flax="0.12.12",
            optax="0.2.8",
            orbax_checkpoint=None,
            transformer_engine=None,
            numpy="2.5.5",
        ),
        devices=DeviceInfo(
            platform="gpu",
            kind=device_kind,
            count=devices,
            local_count=devices,
            process_count=1,
            hostname=hostname,
        ),
        driver=GpuDriver(driver_version="580.159.03", cuda_version="13.0"),
        env={"XLA_FLAGS": xla_flags},
        image=ImageInfo(
            reference=f"ghcr.io/example/jax:{flavor}-{night.isoformat()}",
            manifest=image_manifest or manifest(flavor=flavor),
            manifest_path="/opt/jaxbench/manifest.yaml",
        ),
        git=GitInfo(commit="c" * 40, dirty=False),
    )


def _stand_in(steps: int, seed: int, global_batch: int) -> Workload:
    """The tests' llama-like run: 64 sequences of 4,096 tokens a step; its MFU is not computed from these but
    set to 0.1 / step time (40 % at 0.25 s), proportional to the throughput like any MFU."""
    model = {"model": {"seq_len": 4096}}
    train = {"precision": "bf16", "global_batch": global_batch, "attention": "cudnn", "remat": "full"}
    train |= {"steps": steps, "warmup_steps": 5, "seed": seed}
    config_hash = f"{steps:064d}"[-64:] if seed == 0 else f"{seed:064d}"
    resolved = model | {"train": train, "xla_flags": "hopper"}
    return Workload(resolved, config_hash, "token", 64 * 4096, 4.3e10, 989.4, 1.8)


def run_result(
    night: dt.date,
    step_time: float,
    *,
    recipe: str = "llama2-7b",
    device_kind: str = "NVIDIA H100 80GB HBM3",
    devices: int = 8,
    status: Status = Status.OK,
    loss_curve: list[float | None] | None = None,
    xla_flags: str = "--xla_gpu_enable_latency_hiding_scheduler=true",
    image_manifest: dict[str, Any] | None = None,
    steps: int = 20,
    seed: int = 0,
    backend: str = "native",
    schedule: Schedule | None = None,
    global_batch: int = 64,
    started_at: dt.time = dt.time(2, 0),
    program: Program | None = None,
    profile: Profile | None = None,
    workload: Workload | None = None,
    run_id: str | None = None,
    flavor: str = "jax",
    compile_s: float = 30.0,
    reason: str | None = None,
) -> dict[str, Any]:
    """A run of `recipe` ("family-size") on `night` whose steps take about `step_time` s. With a `workload`,
    its settings, steps (`steps`, `seed` and `global_batch` give way), throughput, MFU and loss optimum are
    that recipe's; `flavor` names the image (and its manifest, unless `image_manifest`)."""
    family, size = recipe.split("-", 1)
    stand_in = workload is None
    work = workload or _stand_in(steps, seed, global_batch)
    steps = int(work.resolved["train"]["steps"])
    warmup = int(work.resolved["train"]["warmup_steps"])
    resolved = {"family": family, "size": size} | work.resolved
    times = [step_time * (1 + 0.001 * ((i * 7) % 5 - 2)) for i in range(steps)]
    ok = status is Status.OK
    stats = summarize(times[warmup:]) if ok else None
    units = work.units_per_step
    default_curve: list[float | None] = [4.0 - 2.0 * i / steps for i in range(steps)]
    curve = loss_curve if loss_curve is not None else default_curve
    throughput = None
    values = {}
    if stats:
        tflops = work.flops_per_unit * units / stats.median / devices / 1e12
        mfu = 0.1 / stats.median if stand_in else tflops / work.peak_tflops_per_device
        throughput = Throughput(
            unit=work.unit,
            units_per_step=units,
            flops_per_unit=work.flops_per_unit,
            flops_convention="test" if stand_in else "6N + attention",
            per_s=units / stats.median,
            per_s_per_device=units / stats.median / devices,
            model_tflops_per_device=tflops,
            peak_tflops_per_device=work.peak_tflops_per_device,
            mfu=mfu,
        )
        values = {
            "perf/step_time_s": stats.median,
            throughput_metric(work.unit): throughput.per_s,
            throughput_metric(work.unit, per_device=True): throughput.per_s_per_device,
            "perf/model_tflops_per_device": tflops,
            "perf/mfu": mfu,
            "perf/compile_time_s": compile_s,
            "loss/final_window": sum(v for v in curve[-10:] if v is not None) / 10,
        }
    metrics = [
        MetricValue(name=k, value=v, unit=METRICS[k].unit, direction=METRICS[k].direction)
        for k, v in values.items()
    ]
    started = dt.datetime.combine(night, started_at, tzinfo=dt.UTC)
    result = RunResult(
        run_id=run_id or uuid.uuid4().hex,
        backend=backend,
        schedule=schedule,
        status=status,
        reason=None if ok else reason or f"{status.value} in the test",
        started_at=started.isoformat(),
        finished_at=(started + dt.timedelta(minutes=10)).isoformat(),
        command=["jaxbench", "run", family],
        recipe=RecipeRecord(
            name=recipe,
            family=family,
            size=size,
            file=f"recipes/{family}.yaml",
            overrides=[],
            hash=work.config_hash,
            resolved=resolved,
        ),
        parallelism=Parallelism(mesh={"data": 1, "fsdp": devices, "tensor": 1}, device_count=devices),
        timing=Timing(
            compile_s=compile_s,
            warmup_steps=warmup,
            step_time_s=stats,
            raw_step_times_s=times if ok else times[:3],
        ),
        throughput=throughput,
        memory=Memory(
            peak_bytes_per_device=60 * 2**30, compiled_temp_bytes=None, compiled_argument_bytes=None
        ),
        loss=Loss(
            per_step=curve,
            final_window=values.get("loss/final_window"),
            window_steps=10,
            optimal=work.loss_optimum,
        ),
        metrics=metrics,
        provenance=provenance(
            night,
            device_kind=device_kind,
            devices=devices,
            xla_flags=xla_flags,
            image_manifest=image_manifest,
            flavor=flavor,
        ),
        program=program,
        profile=profile,
    )
    return json.loads(result.model_dump_json())


@dataclasses.dataclass(frozen=True)
class Microbenchmark:
    """One benchmark of a microbenchmark run, as our suites record it (harness/microbench/suite/)."""

    name: str
    """The test's name with its parameters: "test_matmul[bfloat16-8192-8192-8192]"."""
    params: dict[str, Any]
    median_s: float
    rates: dict[str, float]
    """extra_info's rates ("tflops", "gb_per_s", "fraction_of_peak", ...), from the median."""
    devices: int = 1


ROUNDS = 20
"""Timed calls per benchmark, as the suites' `full` sizes time them."""


def pytest_benchmark(
    night: dt.date,
    benchmarks: Sequence[Microbenchmark],
    *,
    device_kind: str = "NVIDIA H100 80GB HBM3",
    devices: int = 8,
    schedule: Schedule = Schedule.NIGHTLY,
    image_manifest: dict[str, Any] | None = None,
    flags: str = "0123456789abcdef",
    started_at: dt.time = dt.time(3, 0),
) -> dict[str, Any]:
    """A pytest-benchmark file of `jaxbench microbench` on `night`: each benchmark's timed calls around its
    median, its rates in extra_info, and the run's provenance and schedule in machine_info.jaxbench."""
    origin = provenance(night, device_kind=device_kind, devices=devices, image_manifest=image_manifest)
    entries = []
    for bench in benchmarks:
        median = bench.median_s
        data = sorted(median * (1 + 0.002 * ((i * 7) % 5 - 2)) for i in range(ROUNDS))
        stats = {
            "min": data[0],
            "max": data[-1],
            "mean": sum(data) / len(data),
            "median": median,
            "iqr": data[3 * ROUNDS // 4] - data[ROUNDS // 4],
            "rounds": ROUNDS,
            "iterations": 1,
            "data": data,
        }
        test, _, _ = bench.name.partition("[")
        info = {"device_kind": device_kind, "device_count": bench.devices, "flags": flags, "sizes": "full"}
        entries.append(
            {
                "group": None,
                "name": bench.name,
                "fullname": f"harness/microbench/suite/{test}.py::{bench.name}",
                "params": bench.params,
                "param": bench.name.partition("[")[2].rstrip("]"),
                "extra_info": info | bench.rates,
                "stats": stats,
            }
        )
    jaxbench: dict[str, Any] = {
        "sizes": "full",
        "schedule": schedule.value,
        "failed": [],
        "provenance": origin.model_dump(mode="json"),
    }
    return {
        "machine_info": {"node": "node-1", "python_version": "3.12.1", "jaxbench": jaxbench},
        "commit_info": {"id": "c" * 40, "dirty": False, "branch": "main"},
        "benchmarks": entries,
        "datetime": dt.datetime.combine(night, started_at).isoformat(),
        "version": "5.1.0",
    }


def write(directory: Path, document: dict[str, Any], name: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or f"{document['recipe']['name']}-{document['run_id']}.json")
    path.write_text(json.dumps(document))
    return path
