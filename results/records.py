"""The plain records a parsed result file becomes, and the checks and provenance reading every parser shares.

Parsers build these (results/ingest.py for harness results, results/pytest_benchmark.py for
pytest-benchmark JSON); the store writes them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.errors import InvalidInput
from harness.provenance import Provenance
from results.identity import SeriesIdentity, image_date


class IngestError(InvalidInput):
    """A file cannot be ingested; nothing of it was written."""


@dataclasses.dataclass(frozen=True)
class ParsedComponent:
    name: str
    repository: str | None = None
    commit: str | None = None
    version: str | None = None


@dataclasses.dataclass(frozen=True)
class ParsedResult:
    series: SeriesIdentity
    value: float | None
    samples: list[float] | None
    spread: float | None
    status: str
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class ParsedRun:
    source_hash: str
    source_kind: str
    run_uid: str | None
    schedule: str
    """"nightly" (judged) or "ad-hoc" (only reported): harness.run.options.Schedule."""
    night: dt.date
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    image_ref: str | None
    image_digest: str | None
    ci_job_url: str | None
    hostname: str | None
    hosts: int
    status: str
    reason: str | None
    config_hash: str | None
    config: dict[str, Any]
    environment: dict[str, Any]
    loss_curve: list[float | None] | None
    loss_optimum: float | None
    components: list[ParsedComponent]
    results: list[ParsedResult]


def require(mapping: Any, key: str, kind: type | tuple[type, ...], where: str, path: Path) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise IngestError(f"{path}: {where}{key}: missing")
    value = mapping[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise IngestError(f"{path}: {where}{key}: expected {names}, got {type(value).__name__}")
    return value


def provenance_components(origin: Provenance) -> list[ParsedComponent]:
    components = [
        ParsedComponent(name.replace("_", "-"), version=version)
        for name, version in origin.versions.model_dump().items()
        if version is not None
    ]
    components += [
        ParsedComponent("nvidia-driver", version=origin.driver.driver_version),
        ParsedComponent("cuda", version=origin.driver.cuda_version),
    ]
    components.append(ParsedComponent("jaxbench", commit=origin.git.commit))
    from_manifest = manifest_components(origin.image.manifest or {})
    names = {c.name for c in from_manifest}
    # The image's manifest knows repositories and commits; it wins over a bare version of the same name.
    return from_manifest + [c for c in components if c.name not in names and (c.version or c.commit)]


def manifest_components(manifest: Mapping[str, Any]) -> list[ParsedComponent]:
    """Components from an image manifest: `components: {name: {repository|url, commit, version}}`."""
    entries = manifest.get("components", {})
    if not isinstance(entries, Mapping):
        return []
    parsed = []
    for name, entry in entries.items():
        if isinstance(entry, Mapping):
            parsed.append(
                ParsedComponent(
                    str(name),
                    repository=entry.get("repository") or entry.get("url"),
                    commit=entry.get("commit"),
                    version=None if entry.get("version") is None else str(entry.get("version")),
                )
            )
    return parsed


def night_of(started_at: dt.datetime | None, image_ref: str | None, override: dt.date | None) -> dt.date:
    if override is not None:
        return override
    built = image_date(image_ref)
    if built:
        return dt.date.fromisoformat(built)
    if started_at is None:
        raise ValueError("no date")
    return started_at.astimezone(dt.UTC).date()
