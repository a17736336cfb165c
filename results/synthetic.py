"""Synthetic jaxbench result documents: valid run results with chosen numbers (step time, status, loss curve,
flags, image manifest, backend), built through the real result models so that they always match the schema.
For the tests, the store benchmark and demos; nothing here runs a model.

    .venv/bin/python benchmarks/store_speed.py --results 600 --series 20 --nights 30
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

from harness.measure.metrics import METRICS, throughput_metric
from harness.measure.stats import summarize
from harness.provenance.record import DeviceInfo, GitInfo, GpuDriver, ImageInfo, Provenance, Versions
from harness.runtime.options import Schedule
from harness.runtime.result import (
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
) -> dict[str, Any]:
    family, size = recipe.split("-", 1)
    resolved = {
        "family": family,
        "size": size,
        "model": {"seq_len": 4096},
        "train": {
            "precision": "bf16",
            "global_batch": global_batch,
            "attention": "cudnn",
            "remat": "full",
            "steps": steps,
            "warmup_steps": 5,
            "seed": seed,
        },
        "xla_flags": "hopper",
    }
    times = [step_time * (1 + 0.001 * ((i * 7) % 5 - 2)) for i in range(steps)]
    ok = status is Status.OK
    stats = summarize(times[5:]) if ok else None
    units = 64 * 4096
    default_curve: list[float | None] = [4.0 - 2.0 * i / steps for i in range(steps)]
    curve = loss_curve if loss_curve is not None else default_curve
    throughput = (
        Throughput(
            unit="token",
            units_per_step=units,
            flops_per_unit=4.3e10,
            flops_convention="test",
            per_s=units / stats.median,
            per_s_per_device=units / stats.median / devices,
            model_tflops_per_device=4.3e10 * units / stats.median / devices / 1e12,
            peak_tflops_per_device=989.4,
            mfu=0.1 / stats.median,  # 40 % at 0.25 s a step; like any MFU, proportional to the throughput
        )
        if stats
        else None
    )
    values = {}
    if stats and throughput:
        values = {
            "perf/step_time_s": stats.median,
            throughput_metric("token"): throughput.per_s,
            throughput_metric("token", per_device=True): throughput.per_s_per_device,
            "perf/model_tflops_per_device": throughput.model_tflops_per_device,
            "perf/mfu": 0.1 / stats.median,
            "perf/compile_time_s": 30.0,
            "loss/final_window": sum(v for v in curve[-10:] if v is not None) / 10,
        }
    metrics = [
        MetricValue(name=k, value=v, unit=METRICS[k].unit, direction=METRICS[k].direction)
        for k, v in values.items()
    ]
    started = dt.datetime.combine(night, started_at, tzinfo=dt.UTC)
    result = RunResult(
        run_id=uuid.uuid4().hex,
        backend=backend,
        schedule=schedule,
        status=status,
        reason=None if ok else f"{status.value} in the test",
        started_at=started.isoformat(),
        finished_at=(started + dt.timedelta(minutes=10)).isoformat(),
        command=["jaxbench", "run", family],
        recipe=RecipeRecord(
            name=recipe,
            family=family,
            size=size,
            file=f"recipes/{family}.yaml",
            overrides=[],
            hash=f"{steps:064d}"[-64:] if seed == 0 else f"{seed:064d}",
            resolved=resolved,
        ),
        parallelism=Parallelism(mesh={"data": 1, "fsdp": devices, "tensor": 1}, device_count=devices),
        timing=Timing(
            compile_s=30.0, warmup_steps=5, step_time_s=stats, raw_step_times_s=times if ok else times[:3]
        ),
        throughput=throughput,
        memory=Memory(
            peak_bytes_per_device=60 * 2**30, compiled_temp_bytes=None, compiled_argument_bytes=None
        ),
        loss=Loss(per_step=curve, final_window=values.get("loss/final_window"), window_steps=10, optimal=1.8),
        metrics=metrics,
        provenance=Provenance(
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
                hostname="node-1",
            ),
            driver=GpuDriver(driver_version="580.159.03", cuda_version="13.0"),
            env={"XLA_FLAGS": xla_flags},
            image=ImageInfo(
                reference=f"ghcr.io/example/jax:jax-{night.isoformat()}",
                manifest=image_manifest or manifest(),
                manifest_path="/opt/jaxbench/manifest.yaml",
            ),
            git=GitInfo(commit="c" * 40, dirty=False),
        ),
        program=program,
        profile=profile,
    )
    return json.loads(result.model_dump_json())


def write(directory: Path, document: dict[str, Any], name: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or f"{document['recipe']['name']}-{document['run_id']}.json")
    path.write_text(json.dumps(document))
    return path
