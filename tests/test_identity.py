"""Series identity: what splits a history, and that the identity hashes of stored series never move.

JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/test_identity.py
"""

from __future__ import annotations

import dataclasses

from results.identity import HardwareClass, SeriesIdentity

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
