"""Test setup: CPU only, with 8 fake devices so that sharded meshes (data x fsdp x tensor) can be tested.

The environment must be set before jax is first imported, hence at module import here.
"""

from __future__ import annotations

import os

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recipes come from the repository, never from a developer's JAXBENCH_RECIPES."""
    monkeypatch.delenv("JAXBENCH_RECIPES", raising=False)
