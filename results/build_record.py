"""What one `make build` leaves behind for the store: each stage's build time, the image's size compressed (as
a registry stores it) and not, per package group, and the components and packages the image holds. The
nightly ingests it (`jaxbench ingest build/records/*.json`) into series `image/<flavor>/...` that the same
detector as benchmarks judges, so that a night that adds 800 MB opens an incident naming what moved.

Pure: the record is plain data, validated when read back; containers/measure.py measures and writes it,
`parse_build_run` turns it into the store's records (the results layer owns what it ingests, as for
pytest-benchmark files).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from jaxbench.core.schema import Strict, first_problem
from jaxbench.core.urls import scrub_url
from jaxbench.harness.runtime.options import Schedule
from jaxbench.results.identity import HardwareClass, SeriesIdentity, SettingsTuple, settings_tuple
from jaxbench.results.records import IngestError, ParsedComponent, ParsedResult, ParsedRun

RECORD_KIND = "jaxbench-build"
RECORD_DIR = Path("build/records")
"""Where `make build` writes `<flavor>-<date>.json` (`--records` moves it)."""


class StageTime(Strict):
    stage: str
    seconds: float = Field(ge=0)
    image: str


class SizeTotal(Strict):
    bytes: int = Field(ge=0)
    compressed_bytes: int = Field(ge=0)


class NamedSize(SizeTotal):
    name: str


class RecordedComponent(Strict):
    repository: str | None = None
    commit: str | None = None
    version: str | None = None


class BuildRecord(Strict):
    kind: Literal["jaxbench-build"] = "jaxbench-build"
    schema_version: Literal[1] = 1
    flavor: str
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    """The night the image is tagged for."""
    image: str
    created: str
    """When the build started (RFC 3339)."""
    architecture: str
    install: str
    """source or wheel: the two build the same flavor into different images, so different series."""
    base_image: str
    revision: str | None = None
    """This project's commit that built it."""
    builder: str
    """The machine that built it (host name): build times depend on it."""
    stages: list[StageTime] = Field(min_length=1)
    size: SizeTotal
    groups: list[NamedSize]
    """Package groups (CUDA libraries, jaxlib, TransformerEngine, frameworks, Python, OS)."""
    group_sizes: Literal["files", "layers"] = "files"
    """How the groups were measured. "layers": each layer's stored bytes split among the owners of its files
    (containers/owned_deflate.py), tar headers and copies a later layer shadows included, so the groups add
    up to the total. "files": each group's files in the finished image compressed as one stream, which
    leaves those out (a group such as OS reads up to a tenth lower). The two are separate series."""
    layers: list[NamedSize]
    components: dict[str, RecordedComponent]
    """The image's resolved manifest: what the bump moves."""
    packages: dict[str, str]
    """Every Python distribution in the image -> its version: what else moved with them."""

    @property
    def build_seconds(self) -> float:
        return sum(stage.seconds for stage in self.stages)


def parse_build_record(document: Any, source: str) -> BuildRecord:
    """A build record read back from `source`; IngestError naming the field when it is not one."""
    try:
        return BuildRecord.model_validate(document)
    except ValidationError as error:
        raise IngestError(f"{source}: {first_problem(error)}") from error


def is_build_record(document: Any) -> bool:
    return isinstance(document, dict) and document.get("kind") == RECORD_KIND


def packages_of(listing: list[str]) -> dict[str, str]:
    """`name==version` lines (the image manifest's package list) -> {name: version}."""
    packages = {}
    for line in listing:
        name, separator, version = line.partition("==")
        if separator and name.strip():
            packages[name.strip()] = version.strip()
    return packages


def record_path(directory: Path, flavor: str, date: str) -> Path:
    return directory / f"{flavor}-{date}.json"


# --- into the store ---------------------------------------------------------------------------------------

IMAGE_KIND = "image"
"""Series kind of image sizes and build times (besides "recipe" and "microbenchmark")."""
PACKAGE_PREFIX = "package:"
"""Components that are Python distributions in the image rather than manifest pins."""


def image_benchmark(flavor: str) -> str:
    return f"image/{flavor}"


def image_results(record: BuildRecord) -> list[ParsedResult]:
    """The series of one build: sizes (compressed and not, per package group) and build times (per stage),
    each lower-is-better. Settings that make a different image (install mode, base image) split them; the
    builder's architecture is their hardware class."""
    hardware = HardwareClass(f"{record.architecture} image build", 1, 1)
    settings = settings_tuple({"install": record.install, "base_image": record.base_image})

    def result(metric: str, unit: str, value: float, split: SettingsTuple = settings) -> ParsedResult:
        identity = SeriesIdentity(
            image_benchmark(record.flavor), IMAGE_KIND, split, hardware, record.flavor, metric, unit, False
        )
        return ParsedResult(identity, value, None, None, "ok")

    measured = settings  # records without group_sizes keep the series they always had
    if record.group_sizes != "files":
        measured = settings_tuple({**dict(settings), "group_sizes": record.group_sizes})
    results = [
        result("size/compressed_bytes", "bytes", record.size.compressed_bytes),
        result("size/bytes", "bytes", record.size.bytes),
        *(
            result(f"size/group/{g.name}/compressed_bytes", "bytes", g.compressed_bytes, measured)
            for g in record.groups
        ),
        result("build/time_s", "s", record.build_seconds),
        *(result(f"build/stage/{s.stage}/time_s", "s", s.seconds) for s in record.stages),
    ]
    return results


def record_components(record: BuildRecord) -> list[ParsedComponent]:
    """The manifest's components (each repository without credentials: core/urls.py), then every other
    Python distribution as `package:<name>` (a bump that pulls in a new large package names it)."""
    pinned = [
        ParsedComponent(
            name,
            repository=scrub_url(c.repository) if c.repository else None,
            commit=c.commit,
            version=c.version,
        )
        for name, c in record.components.items()
    ]
    names = {name.lower() for name in record.components}
    return pinned + [
        ParsedComponent(f"{PACKAGE_PREFIX}{name}", version=version)
        for name, version in sorted(record.packages.items())
        if name.lower() not in names
    ]


def parse_build_run(
    document: dict[str, Any], source_hash: str, path: Path, *, ci_job_url: str | None, night: dt.date | None
) -> ParsedRun:
    record = parse_build_record(document, str(path))
    try:
        started = dt.datetime.fromisoformat(record.created)
    except ValueError as error:
        raise IngestError(f"{path}: created: expected an RFC 3339 time, got {record.created!r}") from error
    if started.tzinfo is None:
        raise IngestError(f"{path}: created: expected a time with its UTC offset, got {record.created!r}")
    return ParsedRun(
        source_hash=source_hash,
        source_kind="build",
        run_uid=None,
        # Image builds are judged as the nightly's: the record does not say who built it, and the nightly's
        # judge is what ingests records (a build by hand leaves its record in build/records/).
        schedule=Schedule.NIGHTLY.value,
        night=night or dt.date.fromisoformat(record.date),
        started_at=started,
        finished_at=started + dt.timedelta(seconds=record.build_seconds),
        image_ref=record.image,
        image_digest=None,
        ci_job_url=ci_job_url,
        hostname=record.builder,
        hosts=1,
        status="ok",
        reason=None,
        config_hash=None,
        config={"flavor": record.flavor, "install": record.install, "base_image": record.base_image},
        environment={},
        loss_curve=None,
        loss_optimum=None,
        components=record_components(record),
        results=image_results(record),
    )
