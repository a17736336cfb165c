"""Collectives over a 1-D mesh of every device: all-reduce, all-gather, reduce-scatter, all-to-all, broadcast.

Each runs inside `jax.shard_map` on the mesh axis "x", so XLA emits exactly one collective (NCCL on GPUs)
and nothing else worth timing. Sizes are elements per rank, each rank's own part as
`harness.microbench.work.collective_bytes` counts it: the input of all-reduce, all-gather, all-to-all and
broadcast, the output of reduce-scatter. The algorithm and bus bandwidths in extra_info follow nccl-tests
(doc/PERFORMANCE.md), so they compare with `all_reduce_perf` and friends and with the link's peak.

Per-rank blocks are 2-D, (pieces, columns): reduce-scatter and all-to-all cut axis 0 into one piece per
rank, the other collectives have a single row. Columns are never split or moved, so the float64 check can
walk the whole global array a slice of columns at a time when it does not fit in host memory at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxbench.harness.microbench.suite import reference
from jaxbench.harness.microbench.work import Collective, Work, check_close, collective_bytes

AXIS = "x"
SOURCE = 0  # the broadcast's root rank

CASES = {
    "tiny": [
        {"collective": collective.value, "dtype": dtype, "elements": elements}
        for collective in Collective
        for dtype in ("float32", "bfloat16")
        for elements in (2**12, 2**16)
    ],
    "full": [
        {"collective": collective.value, "dtype": dtype, "elements": elements}
        for collective in Collective
        for dtype in ("float32", "bfloat16")
        # 1 MiB, 16 MiB, 256 MiB and 1 GiB per rank in float32 (half that in bfloat16): from latency-bound
        # to well past the size where NCCL reaches its peak bus bandwidth.
        for elements in (2**18, 2**22, 2**26, 2**28)
    ],
}

REFERENCE: dict[Collective, Callable[[np.ndarray], np.ndarray]] = {
    Collective.ALL_REDUCE: reference.all_reduce,
    Collective.ALL_GATHER: reference.all_gather,
    Collective.REDUCE_SCATTER: reference.reduce_scatter,
    Collective.ALL_TO_ALL: reference.all_to_all,
    Collective.BROADCAST: lambda parts: reference.broadcast(parts, source=SOURCE),
}

LARGEST_INPUT = 8  # inputs are integers in [-LARGEST_INPUT, LARGEST_INPUT]
EXACT_LIMIT = 256  # bfloat16 has 8 significant bits: every integer up to 256 in magnitude is exact

# Elements of the widest host array one step of the check holds (float64: 256 MiB), so that the 1 GiB
# all-gather, whose global output is ranks^2 GiB, is checked whole without exhausting host memory.
CHECK_ELEMENTS = 2**25


def _on_mesh(body: Callable[[jax.Array], jax.Array], mesh: jax.sharding.Mesh) -> jax.stages.Wrapped:
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS)))


def _permute_tree_broadcast(block: jax.Array, ranks: int) -> jax.Array:
    """Broadcast from SOURCE as ceil(log2 ranks) rounds of CollectivePermute, for backends without
    CollectiveBroadcast.

    XLA:CPU has no CollectiveBroadcast (jax registers pbroadcast's lowering for GPUs only, and forcing it
    fails with "HLO opcode `collective-broadcast` is not supported by XLA:CPU"). jax documents pbroadcast as
    equivalent to a psum of the input masked to the source, but that is an all-reduce: it carries
    2(n-1)/n of the data over every link and adds, so it would time an all-reduce under the broadcast's
    name. Doubling the set of ranks that hold the data each round moves what a broadcast moves, each
    other rank receiving the source's block exactly once with no arithmetic; its rounds run one after
    the other where NCCL pipelines a ring, so its bus bandwidth is a lower bound of a real broadcast's.
    """
    relative = (jax.lax.axis_index(AXIS) - SOURCE) % ranks  # distance from the source along the ring
    holders = 1
    while holders < ranks:
        pairs = [
            ((SOURCE + i) % ranks, (SOURCE + i + holders) % ranks)
            for i in range(holders)
            if i + holders < ranks
        ]
        received = jax.lax.ppermute(block, AXIS, pairs)
        block = jnp.where((relative >= holders) & (relative < 2 * holders), received, block)
        holders *= 2
    return block


def _broadcast(mesh: jax.sharding.Mesh, x: jax.Array) -> tuple[Callable[..., Any], str]:
    """jax.lax.pbroadcast (XLA CollectiveBroadcast, ncclBroadcast on GPUs) where the backend lowers it,
    else the CollectivePermute tree; and which of the two, for extra_info."""
    native = _on_mesh(lambda block: jax.lax.pbroadcast(block, AXIS, source=SOURCE), mesh)
    try:
        native.lower(x)
    except NotImplementedError:  # jax 0.12 registers the lowering for GPUs only
        ranks = mesh.devices.size
        return _on_mesh(lambda block: _permute_tree_broadcast(block, ranks), mesh), "collective_permute_tree"
    return native, "collective_broadcast"


def _collective(op: Collective, mesh: jax.sharding.Mesh) -> Callable[..., Any]:
    bodies: dict[Collective, Callable[[jax.Array], jax.Array]] = {
        Collective.ALL_REDUCE: lambda block: jax.lax.psum(block, AXIS),
        Collective.ALL_GATHER: lambda block: jax.lax.all_gather(block, AXIS, tiled=True),
        Collective.REDUCE_SCATTER: lambda block: jax.lax.psum_scatter(block, AXIS, tiled=True),
        Collective.ALL_TO_ALL: lambda block: jax.lax.all_to_all(block, AXIS, 0, 0, tiled=True),
    }
    return _on_mesh(bodies[op], mesh)


def _layout(op: Collective, elements: int, ranks: int) -> tuple[int, int]:
    """(rows, columns) of each rank's input block; rows * columns is the rank's input."""
    if op is Collective.REDUCE_SCATTER:
        return ranks, elements  # each rank keeps one row-piece of the sum: `elements` is its output
    if op is Collective.ALL_TO_ALL:
        return ranks, elements // ranks  # one piece per destination rank
    return 1, elements


def _inputs(mesh: jax.sharding.Mesh, shape: tuple[int, int], dtype: str) -> jax.Array:
    """Random integers in [-LARGEST_INPUT, LARGEST_INPUT], generated on the devices already sharded: at
    full sizes the global input (ranks^2 GiB for reduce-scatter) would not pass through the host."""
    sharding = NamedSharding(mesh, P(AXIS))
    generate = jax.jit(
        lambda key: jax.random.randint(key, shape, -LARGEST_INPUT, LARGEST_INPUT + 1).astype(dtype),
        out_shardings=sharding,
    )
    return generate(jax.random.key(0))


def _check(op: Collective, x: jax.Array, out: jax.Array, ranks: int, dtype: str) -> None:
    """Compare every rank's output with the float64 reference, a slice of columns at a time."""
    rows_in, columns = x.shape[0] // ranks, x.shape[1]
    rows_out = out.shape[0] // ranks
    # While every partial sum is an integer within EXACT_LIMIT, any order of additions gives the exact sum
    # in either dtype, so the check demands exactness (float64's tolerance) rather than forgiving the
    # dtype's rounding, which would let an element off by one pass in bfloat16.
    exact = ranks * LARGEST_INPUT <= EXACT_LIMIT
    tolerance_of = "float64" if exact else dtype
    width = max(1, CHECK_ELEMENTS // (ranks * max(rows_in, rows_out)))
    for start in range(0, columns, width):
        stop = min(columns, start + width)
        parts = np.asarray(x[:, start:stop]).reshape(ranks, rows_in, stop - start)
        actual = np.asarray(out[:, start:stop]).reshape(ranks, rows_out, stop - start)
        what = f"{op.value} {dtype}{' (exact integers)' if exact else ''} columns {start}:{stop}"
        check_close(what, actual, REFERENCE[op](parts), tolerance_of)


def test_collective(
    benchmark: Any, measure: Any, platform: str, collective: str, dtype: str, elements: int
) -> None:
    ranks = jax.device_count()
    if ranks < 2:
        pytest.skip(f"collectives need at least 2 devices; this {platform} run has {ranks}")
    op = Collective(collective)
    rows, columns = _layout(op, elements, ranks)
    if columns < 1:
        pytest.skip(f"{elements} elements per rank cannot be cut into {ranks} all-to-all pieces")
    mesh = jax.make_mesh((ranks,), (AXIS,))
    x = _inputs(mesh, (ranks * rows, columns), dtype)
    if op is Collective.BROADCAST:
        fn, implementation = _broadcast(mesh, x)
        benchmark.extra_info["implementation"] = implementation
    else:
        fn = _collective(op, mesh)
    # All-to-all rounds the count down to a whole number of elements per destination, as nccl-tests does.
    own_elements = rows * columns if op is Collective.ALL_TO_ALL else elements
    size = collective_bytes(op, own_elements, jnp.dtype(dtype).itemsize, ranks)
    measure(
        fn,
        x,
        work=Work(bytes=size, collective=op, ranks=ranks),
        check=lambda out: _check(op, x, out, ranks, dtype),
        devices=ranks,
    )
