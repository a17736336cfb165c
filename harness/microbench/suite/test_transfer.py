"""Copies between host memory and the first device: `jax.device_put` of a NumPy array and `np.asarray` of a
device array, float32.

The host side is ordinary pageable NumPy memory, which is what an input pipeline hands to `device_put`, so
on GPUs the figure includes CUDA's staging through pinned buffers. On the CPU backend the "device" is host
memory: `device_put` still copies, but `np.asarray` returns a view of the device buffer, so the
device-to-host time there is only the call's overhead; the tiny CPU run checks the plumbing, not a link.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.harness.microbench.work import ReferenceMismatch, Work

MIB = 2**20

CASES = {
    "tiny": [{"mebibytes": 1}, {"mebibytes": 16}],
    "full": [{"mebibytes": 64}, {"mebibytes": 1024}],
}


def _source(mebibytes: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(mebibytes * MIB // 4, dtype=np.float32)


def _require_identical(what: str, copied: Any, source: np.ndarray) -> None:
    """A copy must reproduce the source bit for bit (float equality would let -0.0 stand for 0.0)."""
    on_host = np.asarray(copied)
    if on_host.dtype != source.dtype or on_host.shape != source.shape:
        raise ReferenceMismatch(
            f"{what}: got {on_host.dtype}{on_host.shape}, expected {source.dtype}{source.shape}"
        )
    differing = int(np.count_nonzero(on_host.view(np.uint32) != source.view(np.uint32)))
    if differing:
        raise ReferenceMismatch(f"{what}: {differing} of {source.size} elements differ from the source")


def test_host_to_device(measure: Any, mebibytes: int) -> None:
    device = jax.devices()[0]
    source = _source(mebibytes)
    measure(
        jax.device_put,
        source,
        device,
        work=Work(bytes=source.nbytes, memory_bound=False),
        check=lambda copied: _require_identical(f"host to device, {mebibytes} MiB", copied, source),
    )


def test_device_to_host(measure: Any, mebibytes: int) -> None:
    source = _source(mebibytes)
    on_device = jax.device_put(source, jax.devices()[0])

    def fresh() -> tuple[jax.Array]:
        # A jax.Array keeps its host copy after the first conversion, so converting the same array again
        # would time a cache hit; an on-device copy, made untimed, has none.
        return (jax.block_until_ready(jnp.copy(on_device)),)

    measure(
        np.asarray,
        work=Work(bytes=source.nbytes, memory_bound=False),
        check=lambda copied: _require_identical(f"device to host, {mebibytes} MiB", copied, source),
        setup=fresh,
    )
