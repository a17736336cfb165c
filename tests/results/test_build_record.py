"""Build records (results/build_record.py): what `make build` leaves for the nightly, read back strictly,
turned into image size and build time series, judged by the same detector as benchmarks. A night whose
bump adds a large package opens an image-size incident that names the package and the component that
moved.

    JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_build_record.py
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from jaxbench.results import store
from jaxbench.results.build_record import image_results, parse_build_record, record_components
from jaxbench.results.commands import ingest
from jaxbench.results.ingest import IngestError, parse_file
from jaxbench.results.judgement.detect import detect
from jaxbench.results.judgement.vocabulary import IncidentDetail, IncidentKind, IncidentState
from jaxbench.results.report.formatting import format_value

FIRST_NIGHT = dt.date(2026, 11, 1)
GB = 1_000_000_000


def record(night: dt.date, *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A cpu image's build record as containers/measure.py writes it (figures of a real cpu build)."""
    document: dict[str, Any] = {
        "kind": "jaxbench-build",
        "schema_version": 1,
        "flavor": "cpu",
        "date": night.isoformat(),
        "image": f"127.0.0.1:5000/jaxbench/jax:cpu-{night}",
        "created": f"{night}T02:00:00+00:00",
        "architecture": "amd64",
        "install": "wheel",
        "base_image": "local/debian:trixie",
        "revision": "1" * 40,
        "builder": "runner-1",
        "stages": [
            {"stage": "base", "seconds": 31.0, "image": "jaxbench-stage/cpu-base"},
            {"stage": "jax", "seconds": 96.5, "image": "jaxbench-stage/cpu-jax"},
            {"stage": "harness", "seconds": 22.5, "image": f"127.0.0.1:5000/jaxbench/jax:cpu-{night}"},
        ],
        "size": {"bytes": int(1.71 * GB), "compressed_bytes": int(0.65 * GB)},
        "groups": [
            {"name": "Python", "bytes": int(1.2 * GB), "compressed_bytes": int(0.45 * GB)},
            {"name": "OS", "bytes": int(0.51 * GB), "compressed_bytes": int(0.2 * GB)},
        ],
        "layers": [
            {"name": "RUN apt-get update", "bytes": int(1.71 * GB), "compressed_bytes": int(0.65 * GB)}
        ],
        "components": {
            "jax": {
                "repository": "https://github.com/jax-ml/jax.git",
                "commit": "a" * 40,
                "version": "0.12.0",
            },
            "standin": {"repository": "git://127.0.0.1/standin", "commit": "b" * 40, "version": "1.0"},
        },
        "packages": {"jax": "0.12.0", "numpy": "2.3.4", "standin": "1.0"},
    }
    if extra:
        document = merge(document, extra)
    return document


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        out[key] = (
            merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


GROWN = {
    "size": {"bytes": int(2.51 * GB), "compressed_bytes": int(0.95 * GB)},
    "groups": [
        {"name": "Python", "bytes": int(2.0 * GB), "compressed_bytes": int(0.75 * GB)},
        {"name": "OS", "bytes": int(0.51 * GB), "compressed_bytes": int(0.2 * GB)},
    ],
    "components": {"standin": {"commit": "c" * 40, "version": "1.1"}},
    "packages": {"standin": "1.1", "pyarrow": "22.0.0"},
}
"""The bump: the stand-in moved to a commit that requires pyarrow, 300 MB compressed more."""


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_a_record_becomes_size_and_build_time_series(tmp_path: Path) -> None:
    parsed = parse_file(write(tmp_path / "cpu.json", record(FIRST_NIGHT)))
    assert parsed.source_kind == "build" and parsed.night == FIRST_NIGHT and parsed.status == "ok"
    values = {r.series.metric: r.value for r in parsed.results}
    assert values == {
        "size/compressed_bytes": int(0.65 * GB),
        "size/bytes": int(1.71 * GB),
        "size/group/Python/compressed_bytes": int(0.45 * GB),
        "size/group/OS/compressed_bytes": int(0.2 * GB),
        "build/time_s": 150.0,
        "build/stage/base/time_s": 31.0,
        "build/stage/jax/time_s": 96.5,
        "build/stage/harness/time_s": 22.5,
    }
    identity = parsed.results[0].series
    assert identity.benchmark == "image/cpu" and identity.kind == "image" and identity.flavor == "cpu"
    assert not identity.higher_is_better
    assert dict(identity.settings) == {"install": "wheel", "base_image": "local/debian:trixie"}
    assert parsed.finished_at - parsed.started_at == dt.timedelta(seconds=150)


def test_another_base_or_install_mode_is_another_series() -> None:
    built = parse_build_record(record(FIRST_NIGHT), "a")
    source = parse_build_record(record(FIRST_NIGHT, extra={"install": "source"}), "b")
    devel = parse_build_record(record(FIRST_NIGHT, extra={"base_image": "nvidia/cuda:13-devel"}), "c")
    keys = {image_results(r)[0].series.key() for r in (built, source, devel)}
    assert len(keys) == 3
    later = parse_build_record(record(FIRST_NIGHT + dt.timedelta(days=1), extra={"builder": "other"}), "d")
    assert image_results(later)[0].series.key() == image_results(built)[0].series.key()


def test_groups_measured_from_the_layers_are_series_of_their_own() -> None:
    """A record without group_sizes measured each group's files in the finished image; one with "layers"
    splits the stored layers (an OS group a tenth larger for the same image). Compared night to night, the
    change of measure would open an image-size incident; as separate series it cannot. The image's total
    and build times are measured as before and keep their series."""
    files = image_results(parse_build_record(record(FIRST_NIGHT), "a"))
    layers = image_results(parse_build_record(record(FIRST_NIGHT, extra={"group_sizes": "layers"}), "b"))
    keys = [{r.series.metric: r.series.key() for r in results} for results in (files, layers)]
    for metric in keys[0]:
        assert (keys[0][metric] == keys[1][metric]) == (not metric.startswith("size/group/")), metric
    # and a record without the field keeps the settings its series always had: the image's own
    assert {r.series.settings for r in files} == {files[0].series.settings}
    with pytest.raises(ValueError, match="group_sizes"):
        parse_build_record(record(FIRST_NIGHT, extra={"group_sizes": "estimated"}), "c")


def test_components_are_the_pins_then_the_other_packages() -> None:
    components = record_components(parse_build_record(record(FIRST_NIGHT, extra=GROWN), "x"))
    names = [c.name for c in components]
    assert names == ["jax", "standin", "package:numpy", "package:pyarrow"]
    assert components[1].commit == "c" * 40 and components[3].version == "22.0.0"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"size": {"compressed_bytes": -1}}, r"size\.compressed_bytes"),
        ({"date": "2026-11-1"}, r"date"),
        ({"stages": []}, r"stages"),
        ({"schema_version": 2}, r"schema_version"),
        ({"created": "yesterday"}, r"created: expected an RFC 3339 time"),
        ({"created": "2026-11-01T02:00:00"}, r"created: expected a time with its UTC offset"),
    ],
)
def test_a_bad_record_names_its_field_and_nothing_is_stored(
    tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    good = write(tmp_path / "good.json", record(FIRST_NIGHT))
    bad = write(tmp_path / "bad.json", merge(record(FIRST_NIGHT), change))
    with pytest.raises(IngestError, match=rf"bad\.json: .*{expected}"):
        parse_file(bad)
    engine = store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")
    with pytest.raises(IngestError):
        ingest(engine, [good, bad])
    assert detect(engine).analyses == []  # the good file went in with it or not at all: not at all


def test_a_bump_that_adds_a_large_package_opens_an_image_size_incident(tmp_path: Path) -> None:
    """Twelve nights of the same image, then two nights after a bump that pulled in pyarrow: one image-size
    incident, first bad on the bump's night, naming the stand-in's commits and the new package; the
    uncompressed size and the Python group move with it, the OS group and build times do not."""
    paths = []
    for offset in range(14):
        night = FIRST_NIGHT + dt.timedelta(days=offset)
        paths.append(
            write(tmp_path / f"cpu-{night}.json", record(night, extra=GROWN if offset >= 12 else None))
        )
    engine = store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")
    ingest(engine, paths)
    detection = detect(engine)
    [incident] = detection.open_incidents
    assert incident.kind == IncidentKind.IMAGE_SIZE.value and incident.state == IncidentState.OPEN.value
    assert incident.night == FIRST_NIGHT + dt.timedelta(days=12)
    detail = IncidentDetail.from_json(incident.details)
    assert {s.metric for s in detail.series} == {
        "size/compressed_bytes",
        "size/bytes",
        "size/group/Python/compressed_bytes",
    }
    compressed = next(s for s in detail.series if s.metric == "size/compressed_bytes")
    assert compressed.magnitude == pytest.approx(0.95 / 0.65 - 1, rel=1e-3)
    moved = {c.name: (c.last_good, c.first_bad) for c in detail.components}
    assert moved == {
        "standin": ("b" * 40, "c" * 40),
        "package:pyarrow": (None, "22.0.0"),
    }


def test_one_night_after_the_bump_is_only_suspected(tmp_path: Path) -> None:
    paths = [
        write(
            tmp_path / f"{offset}.json",
            record(FIRST_NIGHT + dt.timedelta(days=offset), extra=GROWN if offset == 12 else None),
        )
        for offset in range(13)
    ]
    engine = store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")
    ingest(engine, paths)
    detection = detect(engine)
    assert detection.open_incidents == []
    states = {a.history.identity.metric: a.state.value for a in detection.analyses}
    assert states["size/compressed_bytes"] == "suspected"
    assert states["build/time_s"] == "ok"


def test_byte_values_read_as_registries_show_them() -> None:
    assert format_value(3_694_000_000, "bytes") == "3.694 GB"
    assert format_value(650_000_000, "bytes") == "650 MB"
    assert format_value(1_500, "bytes") == "1.5 kB"
    assert format_value(12, "bytes") == "12 bytes"
    assert format_value(1234.5, "s") == "1,234 s"


def test_a_component_repository_with_a_credential_is_stored_without() -> None:
    document = record(
        FIRST_NIGHT, extra={"components": {"jax": {"repository": "https://oauth2:T0k@github.com/jax-ml/jax"}}}
    )
    [jax] = [c for c in record_components(parse_build_record(document, "r.json")) if c.name == "jax"]
    assert jax.repository == "https://github.com/jax-ml/jax"
