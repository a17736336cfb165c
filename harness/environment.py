"""The process environment of a run, settled before JAX starts its backend: which devices are there (to pick
the flag profile and the default size), and the XLA flags and variables the run will use.

XLA reads XLA_FLAGS once, when the backend starts; so the flags are chosen from nvidia-smi's answer, checked
against jaxlib in a child process, and written into this process's environment before the first
jax.devices().

    jaxbench flags show
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, MutableMapping

from core.errors import InvalidInput
from harness import flagcheck, flags
from harness.config import FlagOverrides
from harness.provenance import run_command

NVIDIA_SMI = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]


@dataclasses.dataclass(frozen=True)
class DeviceHint:
    """What a run will find, known without starting JAX."""

    platform: str
    device_kind: str


def device_hint(
    environ: Mapping[str, str], run: Callable[[list[str]], str | None] = run_command
) -> DeviceHint:
    """GPUs per nvidia-smi, unless JAX_PLATFORMS keeps JAX off them."""
    platforms = environ.get("JAX_PLATFORMS", "").lower()
    if platforms and not {"cuda", "gpu"} & set(platforms.split(",")):
        return DeviceHint("cpu", "cpu")
    names = [line.strip() for line in (run(NVIDIA_SMI) or "").splitlines() if line.strip()]
    return DeviceHint("gpu", names[0]) if names else DeviceHint("cpu", "cpu")


def run_flags(
    profile: str,
    overrides: FlagOverrides,
    hint: DeviceHint,
    environ: Mapping[str, str],
    *,
    drop_unknown: bool,
    run_probe: Callable[[Mapping[str, str]], flagcheck.ProbeResult] = flagcheck.probe,
) -> flags.FlagSet:
    """The checked flag set for a run: profile, recipe overrides, then the user's own XLA_FLAGS."""
    chosen = flags.effective(
        profile,
        platform=hint.platform,
        device_kind=hint.device_kind,
        recipe_xla=overrides.xla,
        recipe_env=overrides.env,
        user_xla_flags=environ.get("XLA_FLAGS", ""),
        user_env=environ,
    )
    values = {name: setting.value for name, setting in chosen.xla.items()}
    origins = {name: setting.origin for name, setting in chosen.xla.items()}
    unknown = flagcheck.check_or_drop(
        values, origins, flags.load_renames(), drop=drop_unknown, run_probe=run_probe
    )
    return chosen.without(set(unknown)) if unknown else chosen


def apply(flag_set: flags.FlagSet, environ: MutableMapping[str, str] | None = None) -> None:
    """Write the flags into the environment before the backend starts (it reads them only then)."""
    environ = os.environ if environ is None else environ
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        if environ.get("XLA_FLAGS", "") != flag_set.xla_flags() or any(
            environ.get(k) != v for k, v in flag_set.environment().items()
        ):
            raise RuntimeError(
                "the JAX backend started before the run's XLA flags were set; start runs in a fresh process "
                "(jaxbench run) or set XLA_FLAGS to the flags the run uses"
            )
        return
    environ["XLA_FLAGS"] = flag_set.xla_flags()
    environ.update(flag_set.environment())


def check_platform(hint: DeviceHint, platform: str, device_kind: str, profile: str) -> None:
    """JAX must run on the devices the flags were chosen for."""
    if profile == flags.AUTO and hint.platform != platform:
        raise InvalidInput(
            f"nvidia-smi shows {hint.device_kind!r} but JAX runs on {platform} ({device_kind}); install "
            "jax's CUDA wheels (make bench ACCEL=cuda13), or set JAX_PLATFORMS=cpu to use the CPU on purpose"
        )
