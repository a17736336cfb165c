"""The process environment of a run, settled before JAX starts its backend: which devices are there (to pick
the flag profile and the default size, from nvidia-smi), writing the chosen flags into the environment, and
checking that JAX runs on the devices the flags were chosen for.

XLA reads XLA_FLAGS once, when the backend starts, so `apply` must come before the first jax.devices().

    jaxbench flags show
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, MutableMapping

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.flags import autotune
from jaxbench.harness.flags import profiles as flags
from jaxbench.harness.provenance.collection import run_command

NVIDIA_SMI = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]


@dataclasses.dataclass(frozen=True)
class DeviceHint:
    """What a run will find, known without starting JAX."""

    platform: str
    device_kind: str


def gpus_excluded(environ: Mapping[str, str]) -> bool:
    """JAX_PLATFORMS names platforms, and no GPU one among them."""
    platforms = environ.get("JAX_PLATFORMS", "").lower()
    return bool(platforms) and not {"cuda", "gpu"} & set(platforms.split(","))


def device_hint(
    environ: Mapping[str, str], run: Callable[[list[str]], str | None] = run_command
) -> DeviceHint:
    """GPUs per nvidia-smi, unless JAX_PLATFORMS keeps JAX off them."""
    if gpus_excluded(environ):
        return DeviceHint("cpu", "cpu")
    names = [line.strip() for line in (run(NVIDIA_SMI) or "").splitlines() if line.strip()]
    return DeviceHint("gpu", names[0]) if names else DeviceHint("cpu", "cpu")


def variables(flag_set: flags.FlagSet) -> dict[str, str]:
    """The environment a run's flags make: XLA_FLAGS (with the shared autotuning folder, where there is one)
    and the variables their layers set."""
    xla_flags = flag_set.xla_flags()
    if flag_set.autotune_cache is not None:
        xla_flags = f"{xla_flags} --{autotune.CACHE_FLAG}={flag_set.autotune_cache}".strip()
    return {"XLA_FLAGS": xla_flags, **flag_set.environment()}


def apply(flag_set: flags.FlagSet, environ: MutableMapping[str, str] | None = None) -> None:
    """Write the flags into the environment before the backend starts (it reads them only then)."""
    environ = os.environ if environ is None else environ
    from jax._src import xla_bridge

    wanted = variables(flag_set)
    if xla_bridge.backends_are_initialized():
        if any(environ.get(k, "") != v for k, v in wanted.items()):
            raise RuntimeError(
                "the JAX backend started before the run's XLA flags were set; start runs in a fresh process "
                "(jaxbench run) or set XLA_FLAGS to the flags the run uses"
            )
        return
    environ.update(wanted)


def check_platform(hint: DeviceHint, platform: str, device_kind: str, profile: str) -> None:
    """JAX must run on the devices the flags were chosen for."""
    if profile == flags.AUTO and hint.platform != platform:
        raise InvalidInput(
            f"nvidia-smi shows {hint.device_kind!r} but JAX runs on {platform} ({device_kind}); install "
            "jax's CUDA wheels (make bench ACCEL=cuda13), or set JAX_PLATFORMS=cpu to use the CPU on purpose"
        )
