"""What makes two measurements the same series: pure functions, no database.

A series is broken by anything that changes the numbers (benchmark, precision, batch, sequence length,
mesh, attention implementation, rematerialization, XLA flag profile; hardware class; image flavor; the
backend that trained the recipe; the metric itself). Anything else — image digest, date, host name, job
link — belongs to the run and must not split a history.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/test_identity.py
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any

from harness.run.options import NATIVE_BACKEND

SettingValue = str | int | float | bool | None


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
    settings: tuple[tuple[str, SettingValue], ...]
    """Sorted (name, value) pairs."""
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


def settings_tuple(settings: dict[str, SettingValue]) -> tuple[tuple[str, SettingValue], ...]:
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
