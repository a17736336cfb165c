"""The published releases of a Python project, each with the time its first file was uploaded: from a package
index's JSON simple API (PEP 691, with PEP 700's upload times: PyPI and any index that serves it) or from a
local wheelhouse (a folder of wheels and sdists, whose files' modification times stand in for upload times).

Backfill asks which releases of a component lie in a range and when each came out; triage by wheels asks
which lie between an incident's two pins. Parsing is pure (`releases_from_simple`, `releases_from_files`,
`between`); `fetch_releases` is the one call that reads an index.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_package_index.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from jaxbench.core.errors import ExternalFailure, InvalidInput

PYPI = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
FETCH_TIMEOUT_S = 60.0


@dataclasses.dataclass(frozen=True, order=True)
class Release:
    version: Version
    uploaded: dt.datetime | None = dataclasses.field(compare=False)
    """When its first file was uploaded (UTC); None where the index does not say."""
    yanked: bool = dataclasses.field(default=False, compare=False)
    """Every file of it is yanked (PEP 592): pip leaves it out of ranges, and so does backfill."""


def normalized_name(project: str) -> str:
    """PEP 503's normalized project name: the path segment of the simple API."""
    return re.sub(r"[-_.]+", "-", project).lower()


def _version_of(filename: str, project: str) -> Version | None:
    """The version a wheel or sdist file of `project` carries; None for another project's or another kind."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return version if name == normalized_name(project) else None


def _collect(files: Iterable[tuple[str, dt.datetime | None, bool]], project: str) -> list[Release]:
    """One release per version from (filename, uploaded, yanked) of its files: the earliest upload, yanked
    only where every file is."""
    earliest: dict[Version, dt.datetime | None] = {}
    all_yanked: dict[Version, bool] = {}
    for filename, uploaded, yanked in files:
        version = _version_of(filename, project)
        if version is None:
            continue
        known = earliest.get(version)
        if version not in earliest or (uploaded is not None and (known is None or uploaded < known)):
            earliest[version] = uploaded
        all_yanked[version] = all_yanked.get(version, True) and yanked
    return sorted(Release(v, earliest[v], all_yanked[v]) for v in earliest)


def _upload_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def releases_from_simple(document: Mapping[str, Any], project: str) -> list[Release]:
    """The releases of a PEP 691 project page (`files`: filename, upload-time, yanked)."""
    files = document.get("files")
    if not isinstance(files, list):
        raise ExternalFailure(f"{project}: the index's answer has no list of files (PEP 691 JSON expected)")
    return _collect(
        (
            (str(f.get("filename", "")), _upload_time(f.get("upload-time")), bool(f.get("yanked")))
            for f in files
            if isinstance(f, Mapping)
        ),
        project,
    )


def releases_from_files(paths: Iterable[Path], project: str) -> list[Release]:
    """The releases in a wheelhouse: each file's modification time as its upload time."""
    return _collect(
        ((p.name, dt.datetime.fromtimestamp(p.stat().st_mtime, dt.UTC), False) for p in paths), project
    )


def is_wheelhouse(index: str) -> bool:
    """A local folder (a path or a file:// URL) rather than an index served over HTTP."""
    return urlsplit(index).scheme in ("", "file")


def wheelhouse_path(index: str) -> Path:
    return Path(urlsplit(index).path) if urlsplit(index).scheme == "file" else Path(index)


def fetch_releases(project: str, index: str | None = None) -> list[Release]:
    """Every release of `project` in `index` (a simple-API URL, a wheelhouse folder; default PyPI)."""
    index = index or PYPI
    if is_wheelhouse(index):
        folder = wheelhouse_path(index)
        if not folder.is_dir():
            raise InvalidInput(f"--index {index}: no such folder (a wheelhouse or an index URL expected)")
        return releases_from_files(sorted(folder.iterdir()), project)
    import httpx  # only here: most commands never read an index

    url = f"{index.rstrip('/')}/{normalized_name(project)}/"
    try:
        response = httpx.get(
            url, headers={"Accept": SIMPLE_JSON}, timeout=FETCH_TIMEOUT_S, follow_redirects=True
        )
    except httpx.HTTPError as error:
        raise ExternalFailure(f"{url}: {error}") from error
    if response.status_code == 404:
        raise InvalidInput(f"{project}: no such project on {index}")
    if response.status_code != 200 or not response.headers.get("content-type", "").startswith(SIMPLE_JSON):
        raise ExternalFailure(
            f"{url}: HTTP {response.status_code} ({response.headers.get('content-type', 'no type')}); "
            "expected the JSON simple API (PEP 691)"
        )
    return releases_from_simple(response.json(), project)


def parse_range(text: str, what: str = "range") -> tuple[Version, Version]:
    """`FROM..TO` as two versions, FROM not after TO."""
    low, sep, high = text.partition("..")
    try:
        if not sep or not low or not high:
            raise InvalidVersion(text)
        first, last = Version(low), Version(high)
    except InvalidVersion:
        raise InvalidInput(
            f"{what} {text!r}: expected FROM..TO, two versions (e.g. 0.6.0..0.12.0.1)"
        ) from None
    if first > last:
        raise InvalidInput(f"{what} {text!r}: {first} comes after {last}")
    return first, last


def between(releases: Sequence[Release], first: Version, last: Version) -> list[Release]:
    """The releases from `first` to `last`, both included, oldest version first: none yanked, and no pre- or
    dev release unless an end is one (as pip chooses)."""
    pre = first.is_prerelease or last.is_prerelease
    return sorted(
        r
        for r in releases
        if first <= r.version <= last and not r.yanked and (pre or not r.version.is_prerelease)
    )
