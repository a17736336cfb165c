"""The nights a backfill makes from a component's releases, and the stack each night installs.

JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/backfill/test_backfill_nights.py
"""

from __future__ import annotations

import datetime as dt

import pytest
from packaging.version import Version

from jaxbench.backfill.nights import plan_nights
from jaxbench.containers.manifest import load_manifest
from jaxbench.containers.package_index import Release
from jaxbench.containers.releases import companions_of, released_component, releases_between, requirements_of
from jaxbench.containers.wheel_overlay import flavor_components
from jaxbench.core.errors import InvalidInput


def release(version: str, day: str | None, hour: int = 12) -> Release:
    uploaded = None if day is None else dt.datetime.fromisoformat(f"{day}T{hour:02d}:00:00+00:00")
    return Release(Version(version), uploaded)


def test_each_release_is_its_upload_night_and_a_patch_to_an_older_line_is_left_out() -> None:
    plan = plan_nights(
        [
            release("0.8.2", "2025-12-18"),
            release("0.9.0", "2026-01-20"),
            release("0.8.3", "2026-01-29"),  # after 0.9.0: no nightly ever ran it
            release("0.9.0.1", "2026-02-05"),
        ]
    )
    assert [(str(n.version), n.night.isoformat()) for n in plan.nights] == [
        ("0.8.2", "2025-12-18"),
        ("0.9.0", "2026-01-20"),
        ("0.9.0.1", "2026-02-05"),
    ]
    [(version, why)] = plan.left_out
    assert version == Version("0.8.3") and "uploaded after 0.9.0" in why


def test_two_releases_on_one_night_leave_the_newer_and_a_release_without_a_time_is_left_out() -> None:
    plan = plan_nights(
        [
            release("1.0.0", "2026-03-01", hour=9),
            release("1.0.1", "2026-03-01", hour=20),
            release("1.1", None),
        ]
    )
    assert [str(n.version) for n in plan.nights] == ["1.0.1"]
    assert dict((str(v), why) for v, why in plan.left_out) == {
        "1.0.0": "1.0.1 came out the same night",
        "1.1": "the index gives no upload time",
    }


def test_a_night_installs_what_was_out_by_its_end() -> None:
    [night] = plan_nights([release("0.6.0", "2025-04-17", hour=0)]).nights
    assert night.as_of == dt.datetime(2025, 4, 17, 23, 59, 59, tzinfo=dt.UTC)


def test_jax_brings_jaxlib_at_its_version_and_the_other_released_components_as_companions() -> None:
    components = flavor_components(load_manifest(), "cpu")
    jax = released_component(components, "jax", "cpu")
    assert requirements_of(jax, Version("0.6.0"), "cpu") == ("jax==0.6.0", "jaxlib==0.6.0")
    cuda = requirements_of(jax, Version("0.6.0"), "cuda")
    assert cuda[:2] == ("jax==0.6.0", "jaxlib==0.6.0") and any("cuda" in r for r in cuda[2:])
    assert companions_of(components, "jax") == ("flax", "optax", "orbax-checkpoint")
    assert companions_of(components, "optax") == ("jax", "jaxlib", "flax", "orbax-checkpoint")


def test_a_component_without_releases_or_outside_the_flavor_is_refused_by_name() -> None:
    components = flavor_components(load_manifest(), "cpu")
    with pytest.raises(InvalidInput, match="component 'xla': no published releases"):
        released_component(components, "xla", "cpu")
    with pytest.raises(InvalidInput, match="component 'maxtext': not in the cpu flavor"):
        released_component(components, "maxtext", "cpu")


def test_a_bisection_by_wheels_walks_the_releases_between_two_pins() -> None:
    optax = released_component(flavor_components(load_manifest(), "cpu"), "optax", "cpu")
    listed = [release(v, "2025-01-01") for v in ("0.2.3", "0.2.4", "0.2.5rc1", "0.2.5", "0.2.7")]
    listed.append(Release(Version("0.2.6"), None, yanked=True))

    def releases(distribution: str, index: str | None) -> list[Release]:
        assert (distribution, index) == ("optax", "/wheels")
        return listed

    walked = releases_between("optax", optax, "0.2.4", "0.2.7", "/wheels", releases)
    assert walked == ["0.2.4", "0.2.5", "0.2.7"]
    with pytest.raises(InvalidInput, match="0.2.4 and 0.2.9 are not both releases of optax on /wheels"):
        releases_between("optax", optax, "0.2.4", "0.2.9", "/wheels", releases)
    with pytest.raises(InvalidInput, match="the last good release is not older"):
        releases_between("optax", optax, "0.2.7", "0.2.4", "/wheels", releases)
    with pytest.raises(InvalidInput, match="not two release versions"):
        releases_between("optax", optax, "107e9ad20ca6", "0.2.7", "/wheels", releases)


def test_a_run_that_died_before_its_result_is_named_by_its_exception() -> None:
    from jaxbench.backfill.commands import _exception_line

    missing = "AttributeError: module 'jax.experimental.hijax' has no attribute 'HiPrimitive'"
    died = f"^^^^^^^^^^^^^^^^^ | {missing} | internal error: a bug in jaxbench, not in the input"
    assert _exception_line(died) == missing
    assert _exception_line("TypeError: f() got an unexpected keyword argument 'x'") == (
        "TypeError: f() got an unexpected keyword argument 'x'"
    )
    assert _exception_line(None) == "no reason given"
