"""Kernel and collective microbenchmarks (pytest-benchmark): `make microbench` runs them and ingests the JSON.

A suite module declares `CASES = {"tiny": [...], "full": [...]}`; the keys of the chosen size set's cases
become pytest-benchmark `params`, and through them part of each series' identity. Tests time with the
`measure` fixture after checking their result against a float64 reference. The run uses the recipes' XLA
flag profiles (`auto`); without a GPU the CPU is split into 8 fake devices. More: docs/design.md,
"Microbenchmarks".

    jaxbench microbench [--sizes tiny|full] [-k EXPR]
    python -m pytest harness/microbench/suite --sizes tiny --benchmark-json out.json
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jaxbench.core.errors import InvalidInput
from jaxbench.harness import flags as harness_flags
from jaxbench.harness.config import FlagOverrides
from jaxbench.harness.flags import environment
from jaxbench.harness.flags import profiles as flags
from jaxbench.harness.microbench import SIZE_SETS
from jaxbench.harness.microbench.work import Work, rates
from jaxbench.harness.provenance import collection
from jaxbench.harness.runtime.options import Schedule
from jaxbench.harness.runtime.result import flags_record

FAKE_CPU_DEVICES = 8
REPO = Path(__file__).resolve().parents[3]


def _start_flags() -> tuple[environment.DeviceHint, flags.FlagSet]:
    hint = environment.device_hint(os.environ)
    user_flags = os.environ.get("XLA_FLAGS", "")
    if hint.platform == "cpu" and "xla_force_host_platform_device_count" not in user_flags:
        os.environ["XLA_FLAGS"] = f"{user_flags} --xla_force_host_platform_device_count={FAKE_CPU_DEVICES}"
    try:
        flag_set = harness_flags.for_run("auto", FlagOverrides(), hint, os.environ, drop_unknown=False)
    except InvalidInput as error:
        raise pytest.UsageError(str(error)) from error
    environment.apply(flag_set)
    return hint, flag_set


HINT, FLAG_SET = _start_flags()  # before anything imports jax: XLA reads its flags once per process

import jax  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Timing:
    warmup: int
    rounds: int
    iterations: int


# Fixed round counts rather than pytest-benchmark's time-based calibration: every night times the same
# number of calls, so spreads are comparable night to night.
TIMINGS = {
    "tiny": Timing(warmup=2, rounds=5, iterations=1),
    "full": Timing(warmup=5, rounds=20, iterations=10),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--sizes",
        choices=SIZE_SETS,
        default=None,
        help="size set: tiny (2 CPU cores, under a minute) or full (GPUs); default: full on a GPU, else tiny",
    )
    parser.addoption(
        "--schedule",
        choices=[s.value for s in Schedule],
        default=Schedule.AD_HOC.value,
        help="nightly (judged) or ad-hoc (only reported; the default), recorded in machine_info.jaxbench",
    )


def size_set_of(config: pytest.Config) -> str:
    chosen = config.getoption("--sizes")
    return str(chosen) if chosen else ("full" if HINT.platform == "gpu" else "tiny")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cases: dict[str, list[dict[str, Any]]] | None = getattr(metafunc.module, "CASES", None)
    if not cases:
        return
    chosen = cases[size_set_of(metafunc.config)]
    names = list(chosen[0])
    if not set(names) <= set(metafunc.fixturenames):
        return
    metafunc.parametrize(
        names,
        [tuple(case[name] for name in names) for case in chosen],
        ids=["-".join(str(case[name]) for name in names) for case in chosen],
    )


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """What produced the numbers, read back by `jaxbench ingest` for the run's components and flags."""
    machine_info["jaxbench"] = {
        "sizes": size_set_of(config),
        "schedule": str(config.getoption("--schedule")),
        "failed": FAILED,
        "flags": flags_record(FLAG_SET).model_dump(mode="json"),
        "provenance": collection.collect(REPO).model_dump(mode="json"),
    }


FAILED: list[dict[str, Any]] = []
"""Benchmarks that failed (a wrong result, out of memory, a compile error): results too, so the store
records a failed night instead of a silent gap."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    benchmark = getattr(item, "funcargs", {}).get("benchmark")
    if report.when == "call" and report.failed and benchmark is not None and call.excinfo is not None:
        callspec = getattr(item, "callspec", None)
        message = call.excinfo.exconly()
        FAILED.append(
            {
                "fullname": item.nodeid,
                "name": item.name,
                "params": dict(callspec.params) if callspec else {},
                "extra_info": dict(benchmark.extra_info),
                "status": "oom" if "RESOURCE_EXHAUSTED" in message else "failed",
                "reason": message[:500],
            }
        )
    return report


@pytest.fixture(scope="session")
def size_set(pytestconfig: pytest.Config) -> str:
    return size_set_of(pytestconfig)


@pytest.fixture(scope="session")
def device_kind() -> str:
    return str(jax.devices()[0].device_kind)


@pytest.fixture(scope="session")
def platform() -> str:
    return str(jax.devices()[0].platform)


Measure = Callable[..., dict[str, Any]]


@pytest.fixture
def measure(benchmark: Any, size_set: str, device_kind: str) -> Measure:
    """measure(fn, *args, work=Work(...), check=..., devices=1, setup=None): run once and check the
    output (`check` raises on a wrong result, e.g. with harness.microbench.work.check_close), warm up, time
    with device synchronisation, and put the work and rates into extra_info. `setup` (no arguments,
    returns the args) runs untimed before each call, for work that must start fresh (e.g. a transfer)."""
    timing = TIMINGS[size_set]

    def run(
        fn: Callable[..., Any],
        *args: Any,
        work: Work,
        check: Callable[[Any], object],
        devices: int = 1,
        setup: Callable[[], tuple[Any, ...]] | None = None,
    ) -> dict[str, Any]:
        def call(*call_args: Any) -> Any:
            return jax.block_until_ready(fn(*call_args))

        info = {
            "device_kind": device_kind,
            "device_count": devices,
            "flags": FLAG_SET.identity_hash()[:16],
            "sizes": size_set,
        }
        benchmark.extra_info.update(info)  # first, so that a failure below is recorded with its series
        check(call(*(setup() if setup else args)))
        for _ in range(timing.warmup):  # compile, and let clocks and caches settle
            call(*(setup() if setup else args))
        if setup is None:
            benchmark.pedantic(call, args=args, rounds=timing.rounds, iterations=timing.iterations)
        else:
            benchmark.pedantic(call, setup=lambda: (setup(), {}), rounds=timing.rounds * timing.iterations)
        if benchmark.stats is not None:  # None under --benchmark-disable: checked, not timed
            info |= rates(work, benchmark.stats.stats.median, device_kind)
        benchmark.extra_info.update(info)
        return info

    return run
