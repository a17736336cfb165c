"""What makes two measurements the same series: pure functions, no database.

A series is broken by anything that changes the numbers (benchmark, precision, batch, mesh, flag profile,
hardware class, flavor, backend, metric, ...); what belongs to the run (image digest, date, host) must not
split a history. Series of one benchmark that differ in settings only get readable names (`variant_label`,
against `default_settings`). Every name is plain printable ASCII (`text_problems`, checked at ingest), so a
look-alike name cannot start a series of its own. The list and why: docs/design.md, "Series identity".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_identity.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from jaxbench.harness.config import PLAIN_NAME
from jaxbench.harness.runtime.options import NATIVE_BACKEND
from jaxbench.results.physical import Problem

SettingValue = str | int | float | bool | None
SettingsTuple = tuple[tuple[str, SettingValue], ...]
"""Sorted (name, value) pairs: a series' settings."""


@dataclasses.dataclass(frozen=True)
class HardwareClass:
    device_kind: str
    devices_per_host: int
    hosts: int

    def label(self) -> str:
        hosts = f"{self.hosts} host" + ("s" if self.hosts != 1 else "")
        return f"{self.devices_per_host} x {self.device_kind} x {hosts}"


@dataclasses.dataclass(frozen=True)
class SeriesIdentity:
    benchmark: str
    kind: str
    """"recipe" or "microbenchmark"."""
    settings: SettingsTuple
    hardware: HardwareClass
    flavor: str
    metric: str
    unit: str
    higher_is_better: bool
    backend: str = NATIVE_BACKEND
    """Who trained the recipe ("native", "maxtext", "levanter", ...); "native" for microbenchmarks."""

    def canonical(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "benchmark": self.benchmark,
            "kind": self.kind,
            "settings": dict(self.settings),
            "hardware": dataclasses.asdict(self.hardware),
            "flavor": self.flavor,
            "metric": self.metric,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
        }
        # Only a non-native backend enters the canonical form: every series stored before backends existed
        # is native and keeps its identity hash (and so its history), while another backend's run of the
        # same recipe starts a series of its own.
        if self.backend != NATIVE_BACKEND:
            fields["backend"] = self.backend
        return fields

    def hash(self) -> str:
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def key(self) -> str:
        """A readable, URL-safe, unique key: slug of the main fields plus a short hash."""
        slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{self.benchmark}-{self.metric}").strip("-").lower()
        return f"{slug[:80]}-{self.hash()[:10]}"

    def described(self) -> dict[str, Any]:
        """The series as its readers name it, the keyword arguments of the dashboard's SeriesView and the
        Python API's SeriesRecord: its key, what it measures, the hardware class's label, backend, flavor."""
        return {
            "key": self.key(), "benchmark": self.benchmark, "metric": self.metric, "unit": self.unit,
            "higher_is_better": self.higher_is_better, "hardware": self.hardware.label(),
            "backend": self.backend, "flavor": self.flavor,
        }  # fmt: skip


PRINTABLE_ASCII = re.compile(r"[ -~]*")
"""What every name of a series identity may hold: the registries' names (recipes, backends, metrics, units)
are plain ASCII, and a series name is read, searched and compared by people."""
PLAIN = "a plain name (letters, digits, '.', '_' and '-', as the recipe registry's)"
ASCII = "plain printable ASCII"


def _shown(text: str) -> str:
    """The text and its first character outside printable ASCII, by code point and name."""
    for index, character in enumerate(text):
        if not " " <= character <= "~":
            name = unicodedata.name(character, "a control or unassigned character")
            return f"{text[:80]!r}: U+{ord(character):04X} {name} at {index}"
    return repr(text[:80])


def text_problems(identity: SeriesIdentity) -> Iterator[Problem]:
    """The names of `identity` that are not plain ASCII, as (column, expected, got): a recipe's benchmark
    and every backend are plain names (harness/config.py: PLAIN_NAME), the rest printable ASCII."""
    plain = {"series.backend": identity.backend}
    if identity.kind == "recipe":
        plain["series.benchmark"] = identity.benchmark
    for column, text in plain.items():
        if not PLAIN_NAME.fullmatch(text):
            yield column, PLAIN, _shown(text)
    texts = {
        "series.benchmark": identity.benchmark,
        "series.kind": identity.kind,
        "series.device_kind": identity.hardware.device_kind,
        "series.flavor": identity.flavor,
        "series.metric": identity.metric,
        "series.unit": identity.unit,
    }
    for column, text in texts.items():
        if column not in plain and not PRINTABLE_ASCII.fullmatch(text):
            yield column, ASCII, _shown(text)
    for name, value in identity.settings:
        for text in (name, value) if isinstance(value, str) else (name,):
            if not PRINTABLE_ASCII.fullmatch(text):
                yield "series.settings", f"{ASCII} in setting names and values", _shown(text)


def settings_tuple(settings: dict[str, SettingValue]) -> SettingsTuple:
    return tuple(sorted(settings.items()))


def recipe_settings(
    resolved: dict[str, Any], mesh: dict[str, int] | None, flags_identity: str | None = None
) -> dict[str, SettingValue]:
    """The number-changing settings of a resolved harness recipe (see the module docstring); the effective
    XLA flags and environment enter through their hash, so a flag change starts a new history."""
    model, train = resolved.get("model", {}), resolved.get("train", {})
    length = model.get("seq_len") if "seq_len" in model else model.get("image_size")
    mesh_text = ",".join(f"{axis}={size}" for axis, size in (mesh or {}).items()) or None
    return {
        "precision": train.get("precision"),
        "global_batch": train.get("global_batch"),
        "sequence_or_image": length,
        "mesh": mesh_text,
        "attention": train.get("attention"),
        "remat": train.get("remat"),
        "xla_flags": resolved.get("xla_flags"),
        "flags": flags_identity[:16] if flags_identity else None,
    }


_DATE_TAG = re.compile(r"-(\d{4}-\d{2}-\d{2})$")


def flavor_of(image_ref: str | None, manifest: dict[str, Any] | None) -> str:
    """The image flavor: the manifest's `flavor`, else the tag `<flavor>-YYYY-MM-DD`, else "native"."""
    if manifest and isinstance(manifest.get("flavor"), str):
        return str(manifest["flavor"])
    if image_ref and ":" in image_ref.rsplit("/", 1)[-1]:
        tag = image_ref.rsplit(":", 1)[1]
        return _DATE_TAG.sub("", tag) or "native"
    return "native"


def image_date(image_ref: str | None) -> str | None:
    """The night an image was built, from a `...:<flavor>-YYYY-MM-DD` tag."""
    if not image_ref:
        return None
    match = _DATE_TAG.search(image_ref)
    return match.group(1) if match else None


# --- readable names for series that differ in settings only ------------------------------------------------

Settings = tuple[tuple[str, SettingValue], ...]
VariantFamily = tuple[str, str, HardwareClass, str, str]
"""What series must share for their settings to be compared: benchmark, kind, hardware, flavor, backend."""


def variant_family(identity: SeriesIdentity) -> VariantFamily:
    return (identity.benchmark, identity.kind, identity.hardware, identity.flavor, identity.backend)


@dataclasses.dataclass(frozen=True)
class SettingsUse:
    """How one series was run, for choosing its family's default settings."""

    identity: SeriesIdentity
    newest_nightly: dt.date | None
    """The newest night the nightly ran it; None if only runs by hand did."""
    nightly_runs: int
    runs: int
    """Every run, ad hoc included."""


def default_settings(uses: Iterable[SettingsUse]) -> dict[VariantFamily, dict[str, SettingValue]]:
    """Each family's default settings: the ones the nightly ran on its newest night (of several, the ones it
    ran most), else, for a family only ever run by hand, the ones run most; the first seen wins a tie. The
    recipe's own defaults are not in the store (they depend on the device count and the flag profile of the
    machine), while the nightly runs the recipe's defaults on the machines that matter; the newest night
    counts, so that after a change of flags the series the nightly runs now is the default, the older one
    the variant."""
    ranks: dict[VariantFamily, dict[Settings, tuple[dt.date, int, int]]] = {}
    for use in uses:
        seen = ranks.setdefault(variant_family(use.identity), {})  # in first-seen order
        newest, nightly, runs = seen.get(use.identity.settings, (dt.date.min, 0, 0))
        seen[use.identity.settings] = (
            max(newest, use.newest_nightly or dt.date.min),
            nightly + use.nightly_runs,
            runs + use.runs,
        )
    defaults: dict[VariantFamily, dict[str, SettingValue]] = {}
    for family, seen in ranks.items():
        chosen: Settings = max(seen, key=lambda settings: seen[settings])  # max() keeps the first of equals
        defaults[family] = dict(chosen)
    return defaults


def settings_diff(
    settings: Settings | Mapping[str, SettingValue], default: Mapping[str, SettingValue]
) -> list[tuple[str, SettingValue]]:
    """The settings whose value is not the default's, in name order (one the default lacks counts)."""
    given = dict(settings)
    missing = object()
    return [
        (name, given.get(name))
        for name in sorted(set(given) | set(default))
        if given.get(name, missing) != default.get(name, missing)
    ]


def format_setting(name: str, value: SettingValue) -> str:
    shown = "-" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return f"{name}={shown}"


def variant_text(settings: Settings, default: Mapping[str, SettingValue] | None) -> str:
    """The settings that differ from the default, e.g. "global_batch=16, precision=fp32"; "" for the default
    itself, or where no default is known."""
    if default is None:
        return ""
    return ", ".join(format_setting(name, value) for name, value in settings_diff(settings, default))


def variant_label(identity: SeriesIdentity, default: Mapping[str, SettingValue] | None) -> str:
    """A readable identity: "llama2-tiny · global_batch=16" for a series whose settings differ from its
    family's default (`default_settings`), just "llama2-tiny" for the default itself."""
    text = variant_text(identity.settings, default)
    return f"{identity.benchmark} · {text}" if text else identity.benchmark
