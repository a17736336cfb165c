"""XLA flag profiles: versioned data in recipes/flags/, resolved into one effective set of flags and
environment variables per run. Pure: files and strings in, plain data out (checking the flags against the
installed jaxlib is harness.flags.check's job).

Layers, lowest first: the profile's base, the profile itself (a generation may override base only where an
entry says `overrides_base`), the profiles' flags for the run's training precision (their `precision`
section), the recipe's `flag_overrides`, then your own XLA_FLAGS and environment, which win. One layer giving
one flag two values is a conflict and an error.

    jaxbench flags show hopper
    jaxbench flags diff hopper none
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, ValidationError

from jaxbench.core.documents import parse_yaml
from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import read_text
from jaxbench.core.schema import Strict, first_problem
from jaxbench.core.suggest import did_you_mean
from jaxbench.harness.config import Precision
from jaxbench.harness.measure import peaks

FlagValue = bool | int | float | str
AUTO = "auto"
# Compute capability major version -> profile (CUDA programming guide, "Compute Capabilities" table).
GENERATIONS = {8: "ampere", 9: "hopper", 10: "blackwell"}
GPU_FALLBACK = "base"
CPU_PROFILE = "cpu"


class FlagEntry(Strict):
    value: FlagValue
    reason: str
    source: str
    overrides_base: bool = False
    """Set when a generation deliberately gives a base flag another value."""


class EnvEntry(Strict):
    value: str
    reason: str
    source: str
    overrides_base: bool = False


class PrecisionFlags(Strict):
    xla_flags: dict[str, FlagEntry]


class ProfileFile(Strict):
    description: str
    extends: str | None = None
    xla_flags: dict[str, FlagEntry] = Field(default_factory=dict)
    env: dict[str, EnvEntry] = Field(default_factory=dict)
    precision: dict[Precision, PrecisionFlags] = Field(default_factory=dict)
    """Flags for runs at one training precision only, on top of the profile's own (which they may change)."""


class Rename(Strict):
    replacement: str | None
    """The flag to use instead (no dashes), or None when the flag was removed."""
    how: str
    source: str


@dataclasses.dataclass(frozen=True)
class Setting:
    value: str
    origin: str
    """Where the value comes from: "profile hopper", "recipe", "your XLA_FLAGS", ..."""
    reason: str | None = None
    source: str | None = None


@dataclasses.dataclass(frozen=True)
class FlagSet:
    profile: str
    """The resolved profile name (never "auto")."""
    xla: dict[str, Setting]
    env: dict[str, Setting]
    dropped: tuple[str, ...] = ()
    """Flags removed because the installed jaxlib does not know them (--drop-unknown-flags)."""
    autotune_cache: str | None = None
    """The folder GEMM autotuning is shared through (harness/flags/autotune.py); not part of the identity."""

    def xla_flags(self) -> str:
        """The XLA_FLAGS string, flags sorted by name so that equal sets render equally."""
        return " ".join(f"--{name}={self.xla[name].value}" for name in sorted(self.xla))

    def environment(self) -> dict[str, str]:
        return {name: self.env[name].value for name in sorted(self.env)}

    def identity_hash(self) -> str:
        """What these flags do to the numbers: part of a series' identity."""
        text = json.dumps({"xla": self.xla_flags(), "env": self.environment()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def without(self, names: set[str]) -> FlagSet:
        kept = {k: v for k, v in self.xla.items() if k not in names}
        return dataclasses.replace(self, xla=kept, dropped=tuple(sorted(set(self.dropped) | names)))


def flags_dir() -> Path:
    from jaxbench.harness.recipes import recipes_dir

    return recipes_dir() / "flags"


def available_profiles(directory: Path | None = None) -> list[str]:
    folder = directory or flags_dir()
    return sorted(p.stem for p in folder.glob("*.yaml") if p.stem != "renames")


def _read_yaml(path: Path) -> object:
    return parse_yaml(read_text(path), str(path))


def _error(path: Path, error: ValidationError) -> InvalidInput:
    return InvalidInput(f"{path}: {first_problem(error)}")


def load_profile(name: str, directory: Path | None = None) -> ProfileFile:
    folder = directory or flags_dir()
    path = folder / f"{name}.yaml"
    # A name with a folder in it ('../llama2') would read a YAML file outside the profiles.
    if name == "renames" or Path(name).name != name or not path.is_file():
        available = available_profiles(folder)
        raise InvalidInput(
            f"no XLA flag profile {name!r} in {folder}{did_you_mean(name, available)}; expected one of "
            f"{available} or auto"
        )
    try:
        return ProfileFile.model_validate(_read_yaml(path))
    except ValidationError as error:
        raise _error(path, error) from error


def load_renames(directory: Path | None = None) -> dict[str, Rename]:
    path = (directory or flags_dir()) / "renames.yaml"
    if not path.is_file():
        return {}
    raw = _read_yaml(path) or {}
    if not isinstance(raw, dict):
        raise InvalidInput(f"{path}: expected a mapping of flag name to its replacement")
    try:
        return {str(name): Rename.model_validate(entry) for name, entry in raw.items()}
    except ValidationError as error:
        raise _error(path, error) from error


def render_value(value: FlagValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def resolve_profile(name: str, directory: Path | None = None, precision: str | None = None) -> FlagSet:
    """A profile with its `extends` chain applied, and its flags for runs at `precision` (None: no
    precision's)."""
    chain: list[tuple[str, ProfileFile]] = []
    current: str | None = name
    while current is not None:
        if current in (n for n, _ in chain):
            raise InvalidInput(f"XLA flag profile {name!r}: `extends` loops back to {current!r}")
        profile = load_profile(current, directory)
        chain.append((current, profile))
        current = profile.extends
    xla: dict[str, Setting] = {}
    env: dict[str, Setting] = {}
    for profile_name, profile in reversed(chain):  # base first
        _add_entries(xla, profile.xla_flags, profile_name, f"profile {profile_name}")
        _add_entries(env, profile.env, profile_name, f"profile {profile_name}")
    # A precision's flags are a layer of their own: they may change what the profiles set for every run.
    precision_xla: dict[str, Setting] = {}
    sections = [] if precision is None else [(n, p.precision.get(Precision(precision))) for n, p in chain]
    for profile_name, section in reversed(sections):
        if section is not None:
            origin = f"profile {profile_name}, precision {precision}"
            _add_entries(precision_xla, section.xla_flags, profile_name, origin)
    return FlagSet(name, {**xla, **precision_xla}, env)


def _add_entries(
    table: dict[str, Setting], entries: Mapping[str, FlagEntry | EnvEntry], profile_name: str, origin: str
) -> None:
    for flag, entry in entries.items():
        if flag in table and not entry.overrides_base:
            raise InvalidInput(
                f"recipes/flags/{profile_name}.yaml: {flag} is already set by {table[flag].origin}; "
                "mark the entry `overrides_base: true` if the new value is intended"
            )
        value = render_value(entry.value) if isinstance(entry, FlagEntry) else entry.value
        table[flag] = Setting(value, origin, entry.reason, entry.source)


def auto_profile(platform: str, device_kind: str) -> str:
    """The profile for a device: by GPU generation; unknown GPUs get the common base; CPUs the cpu one."""
    if platform != "gpu":
        return CPU_PROFILE
    capability = peaks.compute_capability(device_kind)
    if capability is None:
        return GPU_FALLBACK
    return GENERATIONS.get(capability[0], GPU_FALLBACK)


def parse_flag_string(text: str, origin: str) -> dict[str, Setting]:
    """`--a=1 --b` -> {a: 1, b: true}. A flag given twice with different values is a conflict."""
    parsed: dict[str, Setting] = {}
    try:
        tokens = shlex.split(text)
    except ValueError as error:
        raise InvalidInput(f"{origin}: cannot split {text!r}: {error}") from error
    for token in tokens:
        if not token.startswith("--"):
            raise InvalidInput(f"{origin}: {token!r} is not a flag; expected --name=value")
        name, sep, value = token[2:].partition("=")
        value = value if sep else "true"
        if name in parsed and parsed[name].value != value:
            raise InvalidInput(f"{origin}: --{name} is given twice, as {parsed[name].value!r} and {value!r}")
        parsed[name] = Setting(value, origin)
    return parsed


def layer(flags: FlagSet, xla: Mapping[str, Setting], env: Mapping[str, Setting]) -> FlagSet:
    """Apply a higher layer: its values replace the lower ones (their origin says so)."""
    return dataclasses.replace(flags, xla={**flags.xla, **xla}, env={**flags.env, **env})


def effective(
    profile: str,
    *,
    platform: str,
    device_kind: str,
    recipe_xla: Mapping[str, FlagValue],
    recipe_env: Mapping[str, str],
    user_xla_flags: str,
    user_env: Mapping[str, str],
    precision: str | None = None,
    directory: Path | None = None,
) -> FlagSet:
    """The flags and environment a run uses, every value with its origin."""
    name = auto_profile(platform, device_kind) if profile == AUTO else profile
    flags = resolve_profile(name, directory, precision)
    flags = layer(
        flags,
        {k: Setting(render_value(v), "recipe") for k, v in recipe_xla.items()},
        {k: Setting(v, "recipe") for k, v in recipe_env.items()},
    )
    yours_env = {k: Setting(user_env[k], "your environment") for k in flags.env if k in user_env}
    return layer(flags, parse_flag_string(user_xla_flags, "your XLA_FLAGS"), yours_env)


def diff(a: FlagSet, b: FlagSet) -> list[tuple[str, str | None, str | None]]:
    """(name, value in a, value in b) for every flag (--name) and variable that differs."""
    rows = []
    for prefix, left, right in (("--", a.xla, b.xla), ("", a.env, b.env)):
        for name in sorted(set(left) | set(right)):
            va = left[name].value if name in left else None
            vb = right[name].value if name in right else None
            if va != vb:
                rows.append((f"{prefix}{name}", va, vb))
    return rows
