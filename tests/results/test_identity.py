"""Series identity: what splits a history, that the identity hashes of stored series never move, and the
readable names of series that differ in settings only.

JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_identity.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from jaxbench.results.identity import (
    HardwareClass,
    SeriesIdentity,
    SettingsUse,
    SettingValue,
    default_settings,
    settings_diff,
    settings_tuple,
    variant_family,
    variant_label,
    variant_text,
)

STEP_TIME = SeriesIdentity(
    benchmark="llama2-7b",
    kind="recipe",
    settings=(("global_batch", 64), ("precision", "bf16")),
    hardware=HardwareClass("NVIDIA H100 80GB HBM3", 8, 1),
    flavor="jax",
    metric="perf/step_time_s",
    unit="s",
    higher_is_better=False,
)
STORED_HASH = "2ea092532069de96c19b659190cb3b908524de3d7c00b03c6b2cc6e1b4c558cb"
"""STEP_TIME's hash as computed before identities had a backend: stores hold hashes like it."""


def test_a_native_identity_hashes_as_before_backends_existed() -> None:
    assert STEP_TIME.backend == "native"
    assert STEP_TIME.hash() == STORED_HASH
    assert "backend" not in STEP_TIME.canonical()
    assert STEP_TIME.key() == f"llama2-7b-perf-step-time-s-{STORED_HASH[:10]}"


def test_the_backend_splits_a_series() -> None:
    maxtext = dataclasses.replace(STEP_TIME, backend="maxtext")
    levanter = dataclasses.replace(STEP_TIME, backend="levanter")
    assert len({STEP_TIME.hash(), maxtext.hash(), levanter.hash()}) == 3
    assert maxtext.canonical()["backend"] == "maxtext"
    assert dataclasses.replace(maxtext, backend="native").hash() == STORED_HASH


# Readable names for series that differ in settings only ---------------------------------------------------


def variant(settings: dict[str, SettingValue], **changes: object) -> SeriesIdentity:
    return dataclasses.replace(STEP_TIME, settings=settings_tuple(settings), **changes)  # type: ignore[arg-type]


DEFAULT = {"global_batch": 64, "precision": "bf16", "remat": "full"}


NIGHT = dt.date(2026, 11, 1)


def use(identity: SeriesIdentity, newest_nightly: int | None, nightly_runs: int, runs: int) -> SettingsUse:
    """`newest_nightly`: days after NIGHT."""
    newest = None if newest_nightly is None else NIGHT + dt.timedelta(days=newest_nightly)
    return SettingsUse(identity, newest, nightly_runs, runs)


def test_the_default_is_what_the_nightly_runs_now_else_what_ran_most() -> None:
    batch16 = variant(DEFAULT | {"global_batch": 16})
    family = variant_family(STEP_TIME)
    # The nightly ran the default; the batch-16 variant ran more often, but only by hand.
    assert default_settings([use(batch16, None, 0, 5), use(variant(DEFAULT), 1, 2, 2)]) == {family: DEFAULT}
    # The nightly's flags changed two nights ago: what it runs now is the default, not what it ran longest.
    old_flags = variant(DEFAULT | {"flags": "0ld"})
    new_flags = variant(DEFAULT | {"flags": "n3w"})
    defaults = default_settings([use(old_flags, 28, 29, 29), use(new_flags, 30, 2, 2)])
    assert defaults[family]["flags"] == "n3w"
    assert variant_label(old_flags, defaults[family]) == "llama2-7b · flags=0ld"
    # The nightly runs two settings each night: the one it ran most.
    assert default_settings([use(batch16, 30, 1, 1), use(variant(DEFAULT), 30, 30, 30)]) == {family: DEFAULT}
    # Nothing ran in the nightly: the settings run most are the reference; a tie goes to the first seen.
    assert default_settings([use(variant(DEFAULT), None, 0, 1), use(batch16, None, 0, 3)])[family] == (
        DEFAULT | {"global_batch": 16}
    )
    assert default_settings([use(batch16, None, 0, 1), use(variant(DEFAULT), None, 0, 1)])[family] == (
        DEFAULT | {"global_batch": 16}
    )


def test_families_are_compared_apart() -> None:
    """Another backend, hardware class or flavor has defaults of its own: its series are no variants."""
    maxtext = variant(DEFAULT | {"global_batch": 16}, backend="maxtext")
    a100 = variant(DEFAULT | {"precision": "fp32"}, hardware=HardwareClass("NVIDIA A100-SXM4-80GB", 8, 1))
    defaults = default_settings([use(variant(DEFAULT), 3, 3, 3), use(maxtext, 0, 1, 1), use(a100, 0, 1, 1)])
    assert len(defaults) == 3
    for identity in (maxtext, a100):
        assert variant_label(identity, defaults[variant_family(identity)]) == "llama2-7b"


def test_a_variant_is_labelled_by_what_differs_from_the_default() -> None:
    batch16 = variant(DEFAULT | {"global_batch": 16})
    assert variant_text(batch16.settings, DEFAULT) == "global_batch=16"
    assert variant_label(batch16, DEFAULT) == "llama2-7b · global_batch=16"
    assert variant_label(variant(DEFAULT), DEFAULT) == "llama2-7b"  # the default itself
    assert variant_label(batch16, None) == "llama2-7b"  # no default known: nothing to say
    # Several differences in name order; a setting the default lacks, or lacks a value for, counts too.
    several = DEFAULT | {"remat": "none", "global_batch": 8, "flags": None, "fp8": True}
    assert variant_text(settings_tuple(several), DEFAULT | {"flags": "ab12"}) == (
        "flags=-, fp8=true, global_batch=8, remat=none"
    )
    assert settings_diff(settings_tuple(DEFAULT), DEFAULT | {"mesh": "data=8"}) == [("mesh", None)]
