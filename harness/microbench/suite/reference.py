"""float64 NumPy references that the microbenchmarks in this directory check their results against once,
before timing (`harness.microbench.work.check_close`)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

# Attention (harness/microbench/suite/test_attention.py), in jax.nn.dot_product_attention's BTNH layout: q is
# (batch, q_len, heads, head_dim), k and v are (batch, kv_len, kv_heads, head_dim). With fewer kv heads
# than query heads (grouped-query attention) query head h reads kv head h // (heads // kv_heads), the
# grouping jax uses. Causal masking is aligned at the top left, as jax's is: query i sees keys j <= i.
#
# Each output row, and each row of dq, depends on its own query row and every key; a row of dk or dv on
# every query row. So a check can ask for some rows only (`rows`, `query_rows`, `key_rows`) and get exactly
# those rows of the full result for a fraction of the work: at the suite's full sizes (8192 tokens, 32
# heads) every row of two kv-head groups took up to 20 s of float64 host time per case on two cores.
#
# The work goes one (batch, query head) and a chunk of query rows at a time, at most SCORES_PER_CHUNK
# (query, key) scores, 16 MiB: at 8192 tokens, whole q_len x kv_len temporaries (512 MiB each, paged in
# afresh by every numpy operation) made a head's work nearly twice as slow. Under the causal mask a chunk
# reads only the keys its last query sees.

SCORES_PER_CHUNK = 2**21


def _attention_layout(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> int:
    """How many query heads share each kv head; ValueError on shapes jax would refuse."""
    if q.ndim != 4 or k.ndim != 4 or k.shape != v.shape:
        raise ValueError(f"expected 4-D q and k, v of one shape, got {q.shape}, {k.shape}, {v.shape}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {q.shape} and k {k.shape} differ in batch or head_dim")
    heads, kv_heads = q.shape[2], k.shape[2]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads are not a multiple of {kv_heads} kv heads")
    return heads // kv_heads


def _picked(rows: npt.ArrayLike | None, length: int, what: str) -> np.ndarray:
    """The row indices asked for, every one of range(length) by default; ValueError on others."""
    if rows is None:
        return np.arange(length)
    picked = np.asarray(rows)
    if picked.size == 0:
        return np.zeros(0, dtype=np.intp)
    if picked.ndim != 1 or not np.issubdtype(picked.dtype, np.integer):
        raise ValueError(f"{what} must be a 1-D sequence of integers, got {picked.dtype}{picked.shape}")
    if picked.min() < 0 or picked.max() >= length:
        raise ValueError(f"{what} must lie in [0, {length}), got {picked.min()}..{picked.max()}")
    return picked


def _query_chunks(
    picked: np.ndarray, q_len: int, kv_len: int, *, every_row: bool
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(positions, targets, local) for each chunk of query rows to compute, either only the picked rows
    or every row of the sequence: the chunk's positions in the sequence, and which picked rows it holds,
    picked[targets] == positions[local]."""
    rows = np.arange(q_len) if every_row else picked
    step = max(1, SCORES_PER_CHUNK // max(kv_len, 1))
    for start in range(0, len(rows), step):
        positions = rows[start : start + step]
        if every_row:
            targets = np.flatnonzero((picked >= start) & (picked < start + len(positions)))
            local = picked[targets] - start
        else:
            targets, local = np.arange(start, start + len(positions)), np.arange(len(positions))
        yield positions, targets, local


def _visible_keys(positions: np.ndarray, kv_len: int, *, causal: bool) -> int:
    """How many leading keys any of the queries at `positions` sees; the rest get probability 0."""
    return min(kv_len, int(positions.max()) + 1) if causal else kv_len


def _attention_probabilities(
    q_rows: np.ndarray, k_head: np.ndarray, positions: np.ndarray, *, causal: bool, scale: float
) -> np.ndarray:
    """softmax(scale q k^T) for the query rows at `positions` of one (batch, head) over the keys in
    k_head: (len(positions), len(k_head)), masked entries exactly 0."""
    logits = (q_rows @ k_head.T) * scale
    if causal:
        np.copyto(logits, -np.inf, where=np.arange(len(k_head))[None, :] > positions[:, None])
    # Subtracting the row maximum keeps exp finite; under the top-left causal mask every row keeps key 0,
    # so no row is all -inf.
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=1, keepdims=True)
    return logits


def _logit_gradient(
    probabilities: np.ndarray, dout_rows: np.ndarray, v_keys: np.ndarray, row_dot: np.ndarray
) -> np.ndarray:
    """dS = P (dout v^T - rowsum(dout * O)) for the given rows of P and the given keys (columns)."""
    d_logits = dout_rows @ v_keys.T
    d_logits -= row_dot
    d_logits *= probabilities
    return d_logits


def attention(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    *,
    causal: bool,
    scale: float | None = None,
    rows: npt.ArrayLike | None = None,
) -> np.ndarray:
    """softmax(scale q k^T) v per head, in float64; `scale` defaults to 1 / sqrt(head_dim) as in jax.
    With `rows`, only those query positions: the full result's [:, rows]."""
    q_, k_, v_ = (np.asarray(x) for x in (q, k, v))
    group = _attention_layout(q_, k_, v_)
    batch, q_len, heads, head_dim = q_.shape
    kv_len = k_.shape[1]
    scale = 1.0 / np.sqrt(head_dim) if scale is None else scale
    picked = _picked(rows, q_len, "rows")
    out = np.empty((batch, len(picked), heads, head_dim))
    for b in range(batch):
        for h in range(heads):
            q_head = np.asarray(q_[b, :, h], dtype=np.float64)
            k_head, v_head = (np.asarray(x[b, :, h // group], dtype=np.float64) for x in (k_, v_))
            for positions, targets, _ in _query_chunks(picked, q_len, kv_len, every_row=False):
                keys = _visible_keys(positions, kv_len, causal=causal)
                probabilities = _attention_probabilities(
                    q_head[positions], k_head[:keys], positions, causal=causal, scale=scale
                )
                out[b, targets, h] = probabilities @ v_head[:keys]
    return out


def attention_grad(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    dout: npt.ArrayLike,
    *,
    causal: bool,
    scale: float | None = None,
    query_rows: npt.ArrayLike | None = None,
    key_rows: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dq, dk, dv) of sum(attention(q, k, v) * dout), in float64, from the closed-form backward pass.

    With P the probabilities and O = P v: dv = P^T dout; dP = dout v^T; the softmax's Jacobian gives
    dS = P (dP - rowsum(dout * O)), since rowsum(P dP) = rowsum(dout O); then dq = scale dS k and
    dk = scale dS^T q. A kv head shared by several query heads collects all their contributions.

    With `query_rows` and `key_rows`, only those rows: the full results' dq[:, query_rows],
    dk[:, key_rows] and dv[:, key_rows]. Rows of dq cost a row of P each; any row of dk or dv still
    needs every query row's P (one q_len x kv_len pass per head), but not the rest of the backward pass.
    """
    q_, k_, v_, dout_ = (np.asarray(x) for x in (q, k, v, dout))
    group = _attention_layout(q_, k_, v_)
    if dout_.shape != q_.shape:
        raise ValueError(f"dout {dout_.shape} must have the output's shape {q_.shape}")
    batch, q_len, heads, head_dim = q_.shape
    kv_len, kv_heads = k_.shape[1:3]
    scale = 1.0 / np.sqrt(head_dim) if scale is None else scale
    picked_queries = _picked(query_rows, q_len, "query_rows")
    picked_keys = _picked(key_rows, kv_len, "key_rows")
    dq = np.zeros((batch, len(picked_queries), heads, head_dim))
    dk, dv = (np.zeros((batch, len(picked_keys), kv_heads, head_dim)) for _ in range(2))
    chunks = functools.partial(_query_chunks, picked_queries, q_len, kv_len, every_row=len(picked_keys) > 0)
    for b in range(batch):
        for h in range(heads):
            q_head, dout_head = (np.asarray(x[b, :, h], dtype=np.float64) for x in (q_, dout_))
            k_head, v_head = (np.asarray(x[b, :, h // group], dtype=np.float64) for x in (k_, v_))
            for positions, targets, local in chunks():
                keys = _visible_keys(positions, kv_len, causal=causal)
                q_rows, dout_rows, k_visible, v_visible = (
                    q_head[positions],
                    dout_head[positions],
                    k_head[:keys],
                    v_head[:keys],
                )
                probabilities = _attention_probabilities(
                    q_rows, k_visible, positions, causal=causal, scale=scale
                )
                row_dot = np.sum(dout_rows * (probabilities @ v_visible), axis=1, keepdims=True)
                if len(targets):
                    d_logits = _logit_gradient(
                        probabilities[local], dout_rows[local], v_visible, row_dot[local]
                    )
                    dq[b, targets, h] = (d_logits @ k_visible) * scale
                seen = picked_keys < keys  # the picked keys these queries see at all
                if seen.any():
                    columns = picked_keys[seen]
                    p_columns = probabilities[:, columns]
                    dv[b, seen, h // group] += p_columns.T @ dout_rows
                    d_columns = _logit_gradient(p_columns, dout_rows, v_head[columns], row_dot)
                    dk[b, seen, h // group] += (d_columns.T @ q_rows) * scale
    return dq, dk, dv


# LayerNorm and RMSNorm over the last axis (harness/microbench/suite/test_norms.py), with a learned per-
# feature `scale` (multiplied as is, not 1 + scale) and, for LayerNorm, `bias`. The variance is the biased one
# (divided by the number of features), as in every framework's LayerNorm. Gradients of the parameters sum over
# all leading axes.
#
# A row of y or dx depends on that row of x (and dy) alone, so a check may compare some rows only: the
# forward references take whatever rows they are given, the gradients take `rows` (indices along axis 0)
# for dx. The parameters' gradients sum over every row and are always computed whole, a chunk of rows at a
# time: at the suite's largest size (32768 x 8192) a float64 copy of x is 2 GiB, and doing the work on
# whole arrays held several such temporaries (12 GB resident) and took over 20 s of host time per case,
# where chunks that stay in the CPU's caches take under a second.

NORM_CHUNK_ELEMENTS = 2**18


def _normalized(x: np.ndarray, eps: float, *, centred: bool) -> tuple[np.ndarray, np.ndarray]:
    """(x_hat, 1 / sqrt(var + eps)) with x_hat the normalized x, before scale and bias."""
    centre = x - x.mean(axis=-1, keepdims=True) if centred else x
    inverse_std = 1.0 / np.sqrt(np.mean(centre * centre, axis=-1, keepdims=True) + eps)
    return centre * inverse_std, inverse_std


def _leading_sum(values: np.ndarray) -> np.ndarray:
    return values.reshape(-1, values.shape[-1]).sum(axis=0)


def _norm_chunks(x: np.ndarray) -> Iterator[slice]:
    """Slices along axis 0 of at most NORM_CHUNK_ELEMENTS elements (at least one row); a 1-D x, a single
    row of features, is one chunk."""
    if x.ndim < 2 or not x.size:
        yield slice(None)
        return
    step = max(1, NORM_CHUNK_ELEMENTS // (x.size // len(x)))
    for start in range(0, len(x), step):
        yield slice(start, start + step)


def _norm_grad(
    x: npt.ArrayLike,
    scale: npt.ArrayLike,
    eps: float,
    dy: npt.ArrayLike,
    rows: npt.ArrayLike | None,
    *,
    centred: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx[rows], dscale, dbias) of sum(norm(x) * dy), dx of every row when `rows` is None."""
    x_, dy_ = np.asarray(x), np.asarray(dy)
    if dy_.shape != x_.shape:
        raise ValueError(f"dy {dy_.shape} must have x's shape {x_.shape}")
    scale64 = np.asarray(scale, dtype=np.float64)
    if rows is not None:
        if x_.ndim < 2:
            raise ValueError(f"rows pick along axis 0 of an x of at least 2 axes, got {x_.shape}")
        picked = _picked(rows, len(x_), "rows")
        x_rows, dy_rows = x_[picked], dy_[picked]
    else:
        x_rows, dy_rows = x_, dy_
    dx = np.empty(x_rows.shape)
    for chunk in _norm_chunks(x_rows):
        x_hat, inverse_std = _normalized(np.asarray(x_rows[chunk], dtype=np.float64), eps, centred=centred)
        g = np.asarray(dy_rows[chunk], dtype=np.float64) * scale64
        projection = x_hat * np.mean(g * x_hat, axis=-1, keepdims=True)
        dx[chunk] = inverse_std * ((g - g.mean(axis=-1, keepdims=True) if centred else g) - projection)
    dscale, dbias = np.zeros(x_.shape[-1:]), np.zeros(x_.shape[-1:])
    for chunk in _norm_chunks(x_):
        x_hat, _ = _normalized(np.asarray(x_[chunk], dtype=np.float64), eps, centred=centred)
        dy64 = np.asarray(dy_[chunk], dtype=np.float64)
        dscale += _leading_sum(dy64 * x_hat)
        dbias += _leading_sum(dy64)
    return dx, dscale, dbias


def layer_norm(x: npt.ArrayLike, scale: npt.ArrayLike, bias: npt.ArrayLike, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * scale + bias over the last axis, in float64."""
    x_hat, _ = _normalized(np.asarray(x, dtype=np.float64), eps, centred=True)
    return x_hat * np.asarray(scale, dtype=np.float64) + np.asarray(bias, dtype=np.float64)


def rms_norm(x: npt.ArrayLike, scale: npt.ArrayLike, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * scale over the last axis, in float64."""
    x_hat, _ = _normalized(np.asarray(x, dtype=np.float64), eps, centred=False)
    return x_hat * np.asarray(scale, dtype=np.float64)


def layer_norm_grad(
    x: npt.ArrayLike,
    scale: npt.ArrayLike,
    bias: npt.ArrayLike,
    eps: float,
    dy: npt.ArrayLike,
    *,
    rows: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dscale, dbias) of sum(layer_norm(x, scale, bias, eps) * dy), in float64; with `rows`, dx of
    those rows only (the full dx[rows]), the parameters' gradients still over every row.

    With g = dy * scale: dx = (g - mean(g) - x_hat mean(g x_hat)) / sqrt(var + eps), the two means
    removing what the centring and the variance absorb. `bias` does not enter any gradient; it is taken
    so that the signature mirrors layer_norm's.
    """
    del bias
    return _norm_grad(x, scale, eps, dy, rows, centred=True)


def rms_norm_grad(
    x: npt.ArrayLike,
    scale: npt.ArrayLike,
    eps: float,
    dy: npt.ArrayLike,
    *,
    rows: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dscale) of sum(rms_norm(x, scale, eps) * dy), in float64, `rows` as in layer_norm_grad: with
    g = dy * scale, dx = (g - x_hat mean(g x_hat)) / sqrt(mean(x^2) + eps); there is no centring term."""
    dx, dscale, _ = _norm_grad(x, scale, eps, dy, rows, centred=False)
    return dx, dscale


# Collectives (harness/microbench/suite/test_collectives.py). Each function takes the ranks' inputs in rank
# order, a list of equally shaped arrays or one array with the ranks on axis 0, and returns every rank's
# output stacked the same way, in float64. Pieces are cut and joined along each part's own axis 0, the axis
# the benchmarks run their collectives on (tiled=True), so a slice along any later axis of the inputs gives
# the same slice of the outputs: that lets a check walk arrays too large for host memory one slice at a time.


def _collective_parts(parts: Sequence[npt.ArrayLike] | np.ndarray) -> np.ndarray:
    """The parts as one float64 array, ranks first; ValueError unless they share a shape of rank >= 1."""
    if len(parts) < 1:
        raise ValueError("a collective needs at least one rank")
    stacked = np.stack([np.asarray(part, dtype=np.float64) for part in parts])
    if stacked.ndim < 2:
        raise ValueError("each rank's part needs at least one axis to split and join along")
    return stacked


def _collective_pieces(stacked: np.ndarray) -> np.ndarray:
    """[rank, piece, ...]: each rank's part cut into as many equal pieces as there are ranks."""
    ranks, rows = stacked.shape[:2]
    if rows % ranks:
        raise ValueError(f"axis 0 of each part ({rows}) must divide evenly among {ranks} ranks")
    return stacked.reshape(ranks, ranks, rows // ranks, *stacked.shape[2:])


def all_reduce(parts: Sequence[npt.ArrayLike] | np.ndarray) -> np.ndarray:
    """Every rank ends with the elementwise sum of all the parts."""
    stacked = _collective_parts(parts)
    return np.broadcast_to(stacked.sum(axis=0), stacked.shape).copy()


def all_gather(parts: Sequence[npt.ArrayLike] | np.ndarray) -> np.ndarray:
    """Every rank ends with all the parts joined along axis 0 in rank order."""
    stacked = _collective_parts(parts)
    ranks, rows = stacked.shape[:2]
    gathered = stacked.reshape(ranks * rows, *stacked.shape[2:])
    return np.broadcast_to(gathered, (ranks, *gathered.shape)).copy()


def reduce_scatter(parts: Sequence[npt.ArrayLike] | np.ndarray) -> np.ndarray:
    """Rank k ends with piece k of the elementwise sum, cut into one equal piece per rank along axis 0."""
    return _collective_pieces(_collective_parts(parts)).sum(axis=0)


def all_to_all(parts: Sequence[npt.ArrayLike] | np.ndarray) -> np.ndarray:
    """Rank k ends with piece k of every rank's part (one equal piece per rank along axis 0), joined in
    the order of the ranks they came from."""
    stacked = _collective_parts(parts)
    pieces = _collective_pieces(stacked)  # [sender, receiver, ...]
    return pieces.swapaxes(0, 1).reshape(stacked.shape)


def broadcast(parts: Sequence[npt.ArrayLike] | np.ndarray, source: int = 0) -> np.ndarray:
    """Every rank ends with the source rank's part; the other ranks' inputs are ignored."""
    stacked = _collective_parts(parts)
    if not 0 <= source < stacked.shape[0]:
        raise ValueError(f"source rank {source} is not one of the {stacked.shape[0]} ranks")
    return np.broadcast_to(stacked[source], stacked.shape).copy()
