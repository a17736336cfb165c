"""The made-up history `jaxbench demo` shows (results/demo_commands.py writes, ingests and judges it): 75
nights of the nightly on 8 x H100 and 8 x H200, every recipe at its default size with three backends that
train it, and each night's microbenchmarks, with one of each finding planted for the detectors to find: a
step, a transient, a drift, an out-of-memory night, a loss that leaves its band, an improvement, and runs by
hand (docs/store.md, "A demo"). Pure and seeded: the same documents every time.

    jaxbench demo --out build/demo
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math
import random
import zlib
from collections.abc import Iterator
from typing import Any

from jaxbench.harness import recipes
from jaxbench.harness.backends import BACKENDS
from jaxbench.harness.measure import peaks
from jaxbench.harness.microbench.work import (
    Collective,
    Work,
    attention_flops,
    bus_bandwidth_factor,
    collective_bytes,
    matmul_flops,
    rates,
)
from jaxbench.harness.runtime.options import NATIVE_BACKEND, Schedule
from jaxbench.harness.runtime.result import Status
from jaxbench.results import synthetic

START = dt.date(2026, 9, 16)
NIGHTS = 75
DEVICES = 8
HARDWARE = {"H100": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200"}
"""Short name -> the device kind JAX reports (harness/measure/peaks.py knows both)."""
RECIPES = ("llama2", "gpt3", "vit")
"""Each at its default size, the size the nightly trains on a GPU."""

MFU = {"llama2": 0.43, "gpt3": 0.46, "vit": 0.24}
"""The native backend's MFU on H100, which sets each recipe's step time: times HARDWARE_MFU, near what
jaxbench measured on one H200 (docs/measurements.md, "GPU check": 45.6, 49.0 and 25.2 %)."""
BACKEND_MFU = {NATIVE_BACKEND: 1.0, "maxtext": 1.1, "levanter": 0.95}
"""Each backend the demo makes up nights for, relative to native (three: enough for the backends view)."""
HARDWARE_MFU = {"H100": 1.0, "H200": 1.06}
"""The same compute, more memory bandwidth: H200's steps are a little faster."""
STEP_NOISE = 0.006
"""Night-to-night noise of a step time (log scale): a quiet GPU nightly's."""
COMPILE_S = {"llama2": 48.0, "gpt3": 52.0, "vit": 21.0}
"""Seconds to compile the training step, 2 % noise: made up."""
LOSS_OPTIMUM = {"llama2": 2.358932519358828, "gpt3": 2.358932519358828, "vit": 1.0157584512563036}
"""The synthetic data's optimal loss at each default size (harness/backends/native/data.py: optimal_loss,
which needs jax; a test keeps these equal)."""


@dataclasses.dataclass(frozen=True)
class Config:
    """A benchmark of the nightly: a recipe at its default size, trained by a backend on a hardware class."""

    family: str
    backend: str
    hardware: str
    """A key of HARDWARE."""

    @property
    def flavor(self) -> str:
        """The image it runs in: a framework's own flavor, else the plain jax image."""
        return BACKENDS[self.backend].flavor or "jax"


# What is planted (night indexes); tests/results/test_demo.py checks that the detectors find each.
REGRESSION_NIGHT = NIGHTS - 15
REGRESSED = (Config("llama2", NATIVE_BACKEND, "H100"), Config("llama2", "maxtext", "H100"),
             Config("gpt3", NATIVE_BACKEND, "H100"))  # fmt: skip
"""A step: an XLA commit slows them by 7 % from REGRESSION_NIGHT on (one open throughput incident)."""
TRANSIENT = Config("gpt3", "levanter", "H200")
TRANSIENT_NIGHT, TRANSIENT_NIGHTS = NIGHTS - 40, 3
"""A transient: 12 % slower for three nights, then back (a recovered incident with both commit ranges)."""
DRIFTING, DRIFT = Config("vit", NATIVE_BACKEND, "H100"), 0.05
"""A drift: 5 % slower over the whole history, a little each night (no night began it: no incident)."""
OUT_OF_MEMORY = Config("gpt3", "maxtext", "H200")
"""Runs out of memory on the newest night (an open validity incident)."""
LEARNING_SLOWLY, LOSS_NIGHT = Config("llama2", "levanter", "H200"), NIGHTS - 4
"""Learns more slowly from LOSS_NIGHT on, a learning rate too low (an open correctness incident)."""
IMPROVEMENT_NIGHT = NIGHTS - 25
"""The bfloat16 matmul microbenchmark on H200 gets 6 % faster (a cuBLAS update): an improvement."""
BY_HAND, AD_HOC_OVERRIDE = Config("llama2", NATIVE_BACKEND, "H100"), "train.remat=full"
AD_HOC_NIGHTS = (NIGHTS - 12, NIGHTS - 11, NIGHTS - 5)
"""Someone tries llama2 with full rematerialization by hand: a series of its own, shown and never judged."""


def configs() -> list[Config]:
    """Every recipe with every backend of BACKEND_MFU that trains it, on each hardware class."""
    return [
        Config(family, backend, hardware)
        for hardware in HARDWARE
        for family in RECIPES
        for backend, entry in BACKENDS.items()
        if backend in BACKEND_MFU and family in entry.families
    ]


def night(index: int) -> dt.date:
    return START + dt.timedelta(days=index)


def _commit(component: str, version: int) -> str:
    return hashlib.sha1(f"{component}-{version}".encode()).hexdigest()


FRAMEWORK_REPOSITORIES = {
    "maxtext": "https://github.com/AI-Hypercomputer/maxtext",
    "levanter": "https://github.com/stanford-crfm/levanter",
}


def image_manifest(index: int, flavor: str) -> dict[str, Any]:
    """The night's image: jax and XLA at that night's commits; a framework's flavor also pins the framework,
    which moves weekly."""
    pinned = synthetic.manifest(_commit("jax", index), _commit("xla", index), flavor)
    if flavor in FRAMEWORK_REPOSITORIES:
        pinned["components"][flavor] = {
            "repository": FRAMEWORK_REPOSITORIES[flavor],
            "commit": _commit(flavor, index // 7),
        }
    return pinned


def workload(family: str, hardware: str, overrides: tuple[str, ...] = ()) -> synthetic.Workload:
    """The recipe's default size as recipes/ resolves it, on `hardware`."""
    recipe = recipes.load(family, None, overrides, default_to_tiny=False)
    peak = peaks.peak_flops_per_device(HARDWARE[hardware], recipe.train.precision.value)
    assert peak is not None, hardware  # both device kinds are in the peak table
    return synthetic.Workload(
        resolved=recipe.resolved(),
        config_hash=recipes.recipe_hash(recipe),
        unit=recipe.model.unit,
        units_per_step=recipe.train.global_batch * recipe.model.units_per_example(),
        flops_per_unit=recipe.model.training_flops_per_unit(),
        peak_tflops_per_device=peak / peaks.TERA,
        loss_optimum=LOSS_OPTIMUM[family],
    )


def step_factor(config: Config, index: int) -> float:
    """How much slower than its usual step the planted findings make this benchmark on this night."""
    factor = 1.0
    if config in REGRESSED and index >= REGRESSION_NIGHT:
        factor *= 1.07
    if config == TRANSIENT and TRANSIENT_NIGHT <= index < TRANSIENT_NIGHT + TRANSIENT_NIGHTS:
        factor *= 1.12
    if config == DRIFTING:
        factor *= 1 + DRIFT * index / (NIGHTS - 1)
    return factor


def loss_curve(work: synthetic.Workload, slower: bool, rng: random.Random) -> list[float | None]:
    """From the loss of uniform guessing towards the data's optimum; `slower`: a learning rate too low."""
    model, steps = work.resolved["model"], int(work.resolved["train"]["steps"])
    start = math.log(model.get("vocab_size") or model["num_classes"])
    optimum, pace = work.loss_optimum, 3.0 / (1.3 if slower else 1.0)
    return [
        optimum + (start - optimum) * math.exp(-pace * step / steps) + rng.gauss(0, 0.003)
        for step in range(steps)
    ]


def _seed(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def recipe_run(config: Config, index: int, work: synthetic.Workload, schedule: Schedule) -> dict[str, Any]:
    """The result file of one run of `config` on night `index`."""
    rng = random.Random(_seed(config, index, schedule))
    ideal = work.flops_per_unit * work.units_per_step / (DEVICES * work.peak_tflops_per_device * 1e12)
    mfu = MFU[config.family] * BACKEND_MFU[config.backend] * HARDWARE_MFU[config.hardware]
    step = ideal / mfu * step_factor(config, index) * math.exp(rng.gauss(0, STEP_NOISE))
    if work.resolved["train"]["remat"] == "full":  # recomputes the whole forward pass in the backward one
        step *= 1.25
    out_of_memory = config == OUT_OF_MEMORY and index == NIGHTS - 1
    slower = config == LEARNING_SLOWLY and index >= LOSS_NIGHT
    return synthetic.run_result(
        night(index),
        step,
        recipe=f"{work.resolved['family']}-{work.resolved['size']}",
        device_kind=HARDWARE[config.hardware],
        devices=DEVICES,
        status=Status.OOM if out_of_memory else Status.OK,
        reason="RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.41GiB"
        if out_of_memory
        else None,
        loss_curve=[] if out_of_memory else loss_curve(work, slower, rng),
        image_manifest=image_manifest(index, config.flavor),
        backend=config.backend,
        schedule=schedule,
        started_at=dt.time(1 + index % 3, rng.randrange(60)),
        workload=work,
        run_id=hashlib.sha256(f"{config}/{index}/{schedule}".encode()).hexdigest()[:32],
        flavor=config.flavor,
        compile_s=COMPILE_S[config.family] * math.exp(rng.gauss(0, 0.02)),
    )


ATTENTION = {"pass_": "forward", "causal": True, "batch": 4, "seq": 4096, "heads": 32, "kv_heads": 8,
             "head_dim": 128, "dtype": "bfloat16", "implementation": "cudnn"}  # fmt: skip
MICROBENCHMARKS = (
    ("test_matmul[bfloat16-8192-8192-8192]", {"dtype": "bfloat16", "m": 8192, "n": 8192, "k": 8192},
     Work(flops=matmul_flops(8192, 8192, 8192), precision="bf16"), 0.72),
    ("test_attention[forward-True-4-4096-32-8-128-bfloat16-cudnn]", ATTENTION,
     Work(flops=attention_flops(4, 32, 4096, 4096, 128, causal=True), precision="bf16"), 0.55),
    ("test_collectives[all_reduce-bfloat16-67108864]", {"collective": "all_reduce", "dtype": "bfloat16",
     "elements": 2**26}, Work(bytes=collective_bytes(Collective.ALL_REDUCE, 2**26, 2, DEVICES),
     collective=Collective.ALL_REDUCE, ranks=DEVICES), None),
)  # fmt: skip
"""Three of the suites' full-size benchmarks (harness/microbench/suite/): test id, parameters, the work of one
call, and the fraction of the device's peak it reaches (made up); the all-reduce reaches BUS_BANDWIDTH."""
BUS_BANDWIDTH = 360e9
"""Bytes/s an all-reduce moves over each NVLink link, below the 450 GB/s of the H100's and H200's NVLink 4."""


def microbench_run(hardware: str, index: int) -> dict[str, Any]:
    """The pytest-benchmark file of the night's microbenchmarks on `hardware`."""
    rng = random.Random(_seed("micro", hardware, index))
    device = HARDWARE[hardware]
    entries = []
    for name, params, work, fraction in MICROBENCHMARKS:
        if work.collective is not None:
            seconds = work.bytes * bus_bandwidth_factor(work.collective, work.ranks) / BUS_BANDWIDTH
        else:
            peak = peaks.peak_flops_per_device(device, "bf16") or 0.0
            seconds = work.flops / (peak * (fraction or 1.0) * HARDWARE_MFU[hardware])
        if hardware == "H200" and name.startswith("test_matmul") and index >= IMPROVEMENT_NIGHT:
            seconds *= 0.94
        seconds *= math.exp(rng.gauss(0, STEP_NOISE / 2))
        info = rates(work, seconds, device)
        entries.append(synthetic.Microbenchmark(name, params, seconds, info, work.ranks))
    return synthetic.pytest_benchmark(
        night(index),
        entries,
        device_kind=device,
        devices=DEVICES,
        image_manifest=image_manifest(index, "jax"),
    )


def documents() -> Iterator[tuple[str, dict[str, Any]]]:
    """(file name, document) of every result of the history, night by night."""
    every = configs()
    works = {(c.family, c.hardware): workload(c.family, c.hardware) for c in every}
    tried = workload(BY_HAND.family, BY_HAND.hardware, (AD_HOC_OVERRIDE,))
    for index in range(NIGHTS):
        folder = night(index).isoformat()
        for config in every:
            document = recipe_run(config, index, works[config.family, config.hardware], Schedule.NIGHTLY)
            name = f"{document['recipe']['name']}-{config.backend}-{config.hardware}"
            yield f"{folder}/{name}.json", document
        if index in AD_HOC_NIGHTS:
            document = recipe_run(BY_HAND, index, tried, Schedule.AD_HOC)
            yield f"{folder}/ad-hoc-{document['recipe']['name']}-remat-full.json", document
        for hardware in HARDWARE:
            yield f"{folder}/microbench-{hardware}.json", microbench_run(hardware, index)
