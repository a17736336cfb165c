"""The releases of a project, from a PEP 691 index page or a wheelhouse, and the ranges a backfill or a
wheel triage walks.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_package_index.py
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from packaging.version import Version

from jaxbench.containers.package_index import (
    Release,
    between,
    fetch_releases,
    parse_range,
    releases_from_simple,
)
from jaxbench.core.errors import ExternalFailure, InvalidInput


def file(name: str, uploaded: str | None, yanked: bool = False) -> dict[str, object]:
    return {"filename": name, "upload-time": uploaded, "yanked": yanked}


def test_a_release_is_its_earliest_file_and_yanked_only_when_every_file_is() -> None:
    page = {
        "files": [
            file("jax-0.6.0.tar.gz", "2025-04-17T00:05:00.1Z"),
            file("jax-0.6.0-py3-none-any.whl", "2025-04-17T00:02:27.5Z"),
            file("jax-0.6.1-py3-none-any.whl", "2025-05-21T10:00:00Z", yanked=True),
            file("jax-0.6.1.tar.gz", "2025-05-21T10:00:01Z"),
            file("jax-0.6.2-py3-none-any.whl", "2025-06-17T10:00:00Z", yanked=True),
            file("jax_plugins-0.1-py3-none-any.whl", "2025-06-18T10:00:00Z"),  # another project's file
            file("jax-0.6.3.exe", "2025-06-19T10:00:00Z"),  # not a wheel or an sdist
        ]
    }
    releases = releases_from_simple(page, "jax")
    assert [str(r.version) for r in releases] == ["0.6.0", "0.6.1", "0.6.2"]
    assert releases[0].uploaded == dt.datetime(2025, 4, 17, 0, 2, 27, 500000, dt.UTC)
    assert [r.yanked for r in releases] == [False, False, True]


def test_a_page_without_files_is_the_index_failing() -> None:
    with pytest.raises(ExternalFailure, match="PEP 691"):
        releases_from_simple({"meta": {}}, "jax")


def release(version: str, yanked: bool = False) -> Release:
    return Release(Version(version), dt.datetime(2025, 1, 1, tzinfo=dt.UTC), yanked)


def test_a_range_holds_both_ends_and_no_yanked_or_pre_release_unless_an_end_is_one() -> None:
    releases = [release(v) for v in ("0.5.3", "0.6.0", "0.7.0rc1", "0.7.0", "0.8.0.dev1", "0.8.0")]
    releases.append(release("0.7.1", yanked=True))
    chosen = between(releases, Version("0.6.0"), Version("0.8.0"))
    assert [str(r.version) for r in chosen] == ["0.6.0", "0.7.0", "0.8.0"]
    with_pre = between(releases, Version("0.7.0rc1"), Version("0.8.0"))
    assert [str(r.version) for r in with_pre] == ["0.7.0rc1", "0.7.0", "0.8.0.dev1", "0.8.0"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.6.0", "expected FROM..TO"),
        ("0.6.0..", "expected FROM..TO"),
        ("six..seven", "expected FROM..TO"),
        ("0.8.0..0.6.0", "0.8.0 comes after 0.6.0"),
    ],
)
def test_a_range_that_is_not_two_ordered_versions_is_refused_by_name(text: str, expected: str) -> None:
    with pytest.raises(InvalidInput, match=expected) as refused:
        parse_range(text, "FROM..TO")
    assert str(refused.value).startswith(f"FROM..TO {text!r}")


def test_a_wheelhouse_dates_its_releases_by_the_files_times(tmp_path: Path) -> None:
    for version, day in (("0.2.4", 12), ("0.2.5", 20)):
        path = tmp_path / f"optax-{version}-py3-none-any.whl"
        path.write_bytes(b"")
        stamp = dt.datetime(2025, 6, day, 8, tzinfo=dt.UTC).timestamp()
        os.utime(path, (stamp, stamp))
    (tmp_path / "chex-0.1.89-py3-none-any.whl").write_bytes(b"")
    releases = fetch_releases("optax", str(tmp_path))
    assert [(str(r.version), r.uploaded.date() if r.uploaded else None) for r in releases] == [
        ("0.2.4", dt.date(2025, 6, 12)),
        ("0.2.5", dt.date(2025, 6, 20)),
    ]
    assert fetch_releases("optax", tmp_path.as_uri()) == releases
    with pytest.raises(InvalidInput, match="no such folder"):
        fetch_releases("optax", str(tmp_path / "missing"))
