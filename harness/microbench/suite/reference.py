"""float64 NumPy references that the microbenchmarks in this directory check their results against once,
before timing (`harness.microbench.work.check_close`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

# Attention (harness/microbench/suite/test_attention.py), in jax.nn.dot_product_attention's BTNH layout: q is
# (batch, q_len, heads, head_dim), k and v are (batch, kv_len, kv_heads, head_dim). With fewer kv heads
# than query heads (grouped-query attention) query head h reads kv head h // (heads // kv_heads), the
# grouping jax uses. Causal masking is aligned at the top left, as jax's is: query i sees keys j <= i.
# The work is done one (batch, query head) at a time so that a long sequence needs one q_len x kv_len
# matrix of host memory rather than all heads' at once.


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


def _attention_probabilities(
    q_head: np.ndarray, k_head: np.ndarray, *, causal: bool, scale: float
) -> np.ndarray:
    """softmax(scale q k^T) for one (batch, head): (q_len, kv_len), masked entries exactly 0."""
    logits = (q_head @ k_head.T) * scale
    if causal:
        query_len, key_len = logits.shape
        np.copyto(logits, -np.inf, where=np.arange(key_len)[None, :] > np.arange(query_len)[:, None])
    # Subtracting the row maximum keeps exp finite; under the top-left causal mask every row keeps key 0,
    # so no row is all -inf.
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=1, keepdims=True)
    return logits


def attention(
    q: npt.ArrayLike, k: npt.ArrayLike, v: npt.ArrayLike, *, causal: bool, scale: float | None = None
) -> np.ndarray:
    """softmax(scale q k^T) v per head, in float64; `scale` defaults to 1 / sqrt(head_dim) as in jax."""
    q64, k64, v64 = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = _attention_layout(q64, k64, v64)
    scale = 1.0 / np.sqrt(q64.shape[3]) if scale is None else scale
    out = np.empty(q64.shape)
    for b in range(q64.shape[0]):
        for h in range(q64.shape[2]):
            probabilities = _attention_probabilities(
                q64[b, :, h], k64[b, :, h // group], causal=causal, scale=scale
            )
            out[b, :, h] = probabilities @ v64[b, :, h // group]
    return out


def attention_grad(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    dout: npt.ArrayLike,
    *,
    causal: bool,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dq, dk, dv) of sum(attention(q, k, v) * dout), in float64, from the closed-form backward pass.

    With P the probabilities and O = P v: dv = P^T dout; dP = dout v^T; the softmax's Jacobian gives
    dS = P (dP - rowsum(dout * O)), since rowsum(P dP) = rowsum(dout O); then dq = scale dS k and
    dk = scale dS^T q. A kv head shared by several query heads collects all their contributions.
    """
    q64, k64, v64, dout64 = (np.asarray(x, dtype=np.float64) for x in (q, k, v, dout))
    group = _attention_layout(q64, k64, v64)
    if dout64.shape != q64.shape:
        raise ValueError(f"dout {dout64.shape} must have the output's shape {q64.shape}")
    scale = 1.0 / np.sqrt(q64.shape[3]) if scale is None else scale
    dq, dk, dv = np.empty(q64.shape), np.zeros(k64.shape), np.zeros(v64.shape)
    for b in range(q64.shape[0]):
        for h in range(q64.shape[2]):
            q_head, k_head, v_head, dout_head = (
                q64[b, :, h],
                k64[b, :, h // group],
                v64[b, :, h // group],
                dout64[b, :, h],
            )
            probabilities = _attention_probabilities(q_head, k_head, causal=causal, scale=scale)
            row_dot = np.sum(dout_head * (probabilities @ v_head), axis=1, keepdims=True)
            dv[b, :, h // group] += probabilities.T @ dout_head
            # dS overwrites dP in place: the (q_len, kv_len) matrices dominate host memory at long lengths.
            d_logits = dout_head @ v_head.T
            d_logits -= row_dot
            d_logits *= probabilities
            dq[b, :, h] = (d_logits @ k_head) * scale
            dk[b, :, h // group] += (d_logits.T @ q_head) * scale
    return dq, dk, dv


# LayerNorm and RMSNorm over the last axis (harness/microbench/suite/test_norms.py), with a learned per-
# feature `scale` (multiplied as is, not 1 + scale) and, for LayerNorm, `bias`. The variance is the biased one
# (divided by the number of features), as in every framework's LayerNorm. Gradients of the parameters sum over
# all leading axes.


def _normalized(x: np.ndarray, eps: float, *, centred: bool) -> tuple[np.ndarray, np.ndarray]:
    """(x_hat, 1 / sqrt(var + eps)) with x_hat the normalized x, before scale and bias."""
    centre = x - x.mean(axis=-1, keepdims=True) if centred else x
    inverse_std = 1.0 / np.sqrt(np.mean(centre * centre, axis=-1, keepdims=True) + eps)
    return centre * inverse_std, inverse_std


def _leading_sum(values: np.ndarray) -> np.ndarray:
    return values.reshape(-1, values.shape[-1]).sum(axis=0)


def layer_norm(x: npt.ArrayLike, scale: npt.ArrayLike, bias: npt.ArrayLike, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * scale + bias over the last axis, in float64."""
    x_hat, _ = _normalized(np.asarray(x, dtype=np.float64), eps, centred=True)
    return x_hat * np.asarray(scale, dtype=np.float64) + np.asarray(bias, dtype=np.float64)


def rms_norm(x: npt.ArrayLike, scale: npt.ArrayLike, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * scale over the last axis, in float64."""
    x_hat, _ = _normalized(np.asarray(x, dtype=np.float64), eps, centred=False)
    return x_hat * np.asarray(scale, dtype=np.float64)


def layer_norm_grad(
    x: npt.ArrayLike, scale: npt.ArrayLike, bias: npt.ArrayLike, eps: float, dy: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dscale, dbias) of sum(layer_norm(x, scale, bias, eps) * dy), in float64.

    With g = dy * scale: dx = (g - mean(g) - x_hat mean(g x_hat)) / sqrt(var + eps), the two means
    removing what the centring and the variance absorb. `bias` does not enter any gradient; it is taken
    so that the signature mirrors layer_norm's.
    """
    del bias
    dy64 = np.asarray(dy, dtype=np.float64)
    x_hat, inverse_std = _normalized(np.asarray(x, dtype=np.float64), eps, centred=True)
    g = dy64 * np.asarray(scale, dtype=np.float64)
    dx = inverse_std * (
        g - g.mean(axis=-1, keepdims=True) - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True)
    )
    return dx, _leading_sum(dy64 * x_hat), _leading_sum(dy64)


def rms_norm_grad(
    x: npt.ArrayLike, scale: npt.ArrayLike, eps: float, dy: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dscale) of sum(rms_norm(x, scale, eps) * dy), in float64: with g = dy * scale,
    dx = (g - x_hat mean(g x_hat)) / sqrt(mean(x^2) + eps); there is no centring term."""
    dy64 = np.asarray(dy, dtype=np.float64)
    x_hat, inverse_std = _normalized(np.asarray(x, dtype=np.float64), eps, centred=False)
    g = dy64 * np.asarray(scale, dtype=np.float64)
    dx = inverse_std * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    return dx, _leading_sum(dy64 * x_hat)


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
