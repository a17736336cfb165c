"""XLA flags: the one entry point for the flags a run uses (`for_run`) and for the flag sets that
`jaxbench flags` and `ab` compare (`for_spec`). Behind it: profiles.py (versioned profiles in
recipes/flags/, layered into one set; pure), check.py (which flags the installed jaxlib knows, asked of
jaxlib itself) and environment.py (which devices the run will see; writing the flags before the backend
starts).

    jaxbench flags show hopper
    jaxbench flags check auto
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from jaxbench.harness.config import FlagOverrides
from jaxbench.harness.flags import autotune, check, profiles
from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.flags.profiles import FlagSet

__all__ = ["DeviceHint", "FlagSet", "check_known", "chosen_for_run", "for_run", "for_spec"]


def chosen_for_run(
    profile: str,
    overrides: FlagOverrides,
    hint: DeviceHint,
    environ: Mapping[str, str],
    *,
    precision: str | None = None,
) -> FlagSet:
    """The flag set of a run before jaxlib is asked: the profile (auto: by the devices in `hint`) with its
    flags for the run's training `precision`, the recipe's overrides, then the user's own XLA_FLAGS and
    variables. Pure (profile files in, plain data out): what every launcher checks before it starts
    anything, wherever the jaxlib that runs is (harness/run/inputs.py: check_inputs)."""
    return profiles.effective(
        profile,
        platform=hint.platform,
        device_kind=hint.device_kind,
        recipe_xla=overrides.xla,
        recipe_env=overrides.env,
        user_xla_flags=environ.get("XLA_FLAGS", ""),
        user_env=environ,
        precision=precision,
    )


def for_run(
    profile: str,
    overrides: FlagOverrides,
    hint: DeviceHint,
    environ: Mapping[str, str],
    *,
    drop_unknown: bool,
    precision: str | None = None,
    run_probe: Callable[[Mapping[str, str]], check.ProbeResult] = check.probe,
    autotune_libraries: Callable[[], list[str]] = autotune.library_identities,
) -> FlagSet:
    """The checked flag set of a run (chosen_for_run): flags jaxlib does not know are invalid input naming
    each one, or, with `drop_unknown`, left out and recorded in the set. On a GPU the set also names the
    folder its GEMM autotuning is shared through."""
    chosen = chosen_for_run(profile, overrides, hint, environ, precision=precision)
    values = {name: setting.value for name, setting in chosen.xla.items()}
    origins = {name: setting.origin for name, setting in chosen.xla.items()}
    unknown = check.check_or_drop(
        values, origins, profiles.load_renames(), drop=drop_unknown, run_probe=run_probe
    )
    checked = chosen.without(set(unknown)) if unknown else chosen
    folder = autotune.shared_folder(
        hint.platform, hint.device_kind, checked.xla, environ, libraries=autotune_libraries
    )
    return dataclasses.replace(checked, autotune_cache=None if folder is None else str(folder))


def for_spec(spec: str | None, hint: DeviceHint) -> FlagSet:
    """A profile name (or auto, or nothing: auto) resolved for the devices in `hint`, or a literal flag
    string ("--name=value ...")."""
    if spec and spec.strip().startswith("--"):
        return FlagSet("(given flags)", profiles.parse_flag_string(spec, "the given flags"), {})
    name = spec or profiles.AUTO
    if name == profiles.AUTO:
        name = profiles.auto_profile(hint.platform, hint.device_kind)
    return profiles.resolve_profile(name)


def check_known(flags: Mapping[str, str], origins: Mapping[str, str] | None = None) -> str:
    """Invalid input naming every flag the installed jaxlib does not know; returns jaxlib's version."""
    check.check_or_drop(flags, origins or {}, profiles.load_renames(), drop=False)
    return check.jaxlib_version()
