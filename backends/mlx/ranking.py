"""Each row's most likely next tokens from its logits, on numpy: the MLX backend's last
step of every forward.

MLX's CPU backend computes `exp` one element at a time and its `argpartition` over a
49,152-token vocabulary is a full selection per row: for 100 rows, `logsumexp` took
84 ms and the top-k 49-76 ms, against 7 ms and 6 ms here. numpy's sum is also the more
exact one: over 49,152 terms MLX's `logsumexp` was off by up to 8e-5 (against float64),
numpy's by 1e-6.

The top k come from block maxima: split each row into `BLOCKS` blocks; the k-th largest
block maximum is k distinct logits, so no logit of the top k is below it, and only the
few logits at or above it are sorted. Ties go to the lower token id, as argmax's do.
"""

from __future__ import annotations

import numpy as np

BLOCKS = 64


def ranked(logits: np.ndarray, k: int, also: np.ndarray | None = None):
    """For logits (rows, vocab), float32: each row's k most likely token ids (rows, k),
    most likely first, their log-probabilities (rows, k), and where `also` names tokens
    per row (one a row, (rows,), or several, (rows, m)), their log-probabilities (of
    `also`'s shape), read from the same logits. Overwrites `logits`.
    Raises ValueError where a row holds NaN or its largest logit is infinite."""
    rows, vocab = logits.shape
    k = min(k, vocab)
    top = logits.max(axis=-1)
    if not np.isfinite(top).all():  # NaN anywhere in a row makes its maximum NaN
        raise ValueError("the model's logits are not finite numbers")
    bounds = _kth_bound(logits, k)
    ids = np.stack([_top(row, k, bound) for row, bound in zip(logits, bounds, strict=True)])
    chosen = np.take_along_axis(logits, ids, axis=-1)
    extra = None
    if also is not None:
        extra = np.take_along_axis(logits, also.reshape(rows, -1), axis=-1).reshape(also.shape)
    totals = _logsumexp_in_place(logits, top)
    logprobs = chosen - totals[:, None]
    if extra is not None:
        extra = extra - totals.reshape((rows,) + (1,) * (extra.ndim - 1))
    return ids, logprobs, extra


def _kth_bound(logits: np.ndarray, k: int) -> np.ndarray:
    """A value per row that its k largest logits all reach: the k-th largest of its block
    maxima (-inf where there are fewer blocks than k)."""
    rows, vocab = logits.shape
    size = vocab // BLOCKS
    if size == 0 or k > BLOCKS:
        return np.full(rows, -np.inf, logits.dtype)
    maxima = logits[:, : size * BLOCKS].reshape(rows, BLOCKS, size).max(axis=-1)
    return np.partition(maxima, -k, axis=-1)[:, -k]


def _top(row: np.ndarray, k: int, bound: float) -> np.ndarray:
    candidates = np.flatnonzero(row >= bound)
    order = np.argsort(-row[candidates], kind="stable")  # ascending ids: ties to the lower
    return candidates[order[:k]]


def _logsumexp_in_place(logits: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Each row's log-sum-exp, given its maximum `top`."""
    np.subtract(logits, top[:, None], out=logits)
    np.exp(logits, out=logits)
    return np.log(logits.sum(axis=-1)) + top
