"""What the fragment tree takes from the disk before a prefill and gives it after one.

`restore` files in the tree what `backends.mlx.kv_disk` holds of a context beyond what
the tree holds; `keep` hands a context read at length to the disk; `unread` says how much
of a context neither holds. Between them, MLX
arrays become numpy ones and back (bfloat16, which numpy lacks, as its raw 16-bit
words). Owns those two thresholds and the conversion; the files are `kv_disk`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import mlx.core as mx
import numpy as np

from backends.base import Candidate
from backends.mlx.kv_disk import DiskKV
from backends.mlx.kv_tree import FragmentTree

KEEP_AT_LEAST = 256  # a prefill of fewer new tokens than this is not worth a file
RESTORE_AT_LEAST = 32  # stored KV is read back only when it spares this many tokens


def restore(tree: FragmentTree, disk: DiskKV | None, ids: Sequence[int], candidates) -> int:
    """File in the tree what the disk holds of `ids` beyond what the tree holds; return
    how many leading ids the tree then holds. `candidates(ids, logprobs)` makes the
    stored top candidates."""
    held = tree.match(list(ids)).length
    if disk is None or len(ids) - held < RESTORE_AT_LEAST:
        return held
    stored = disk.load(ids, more_than=held + RESTORE_AT_LEAST - 1)
    if stored is None:
        return held
    top = None
    if stored.top_ids is not None:
        top = candidates(list(stored.top_ids), list(stored.top_logprobs))
    keys, values = (_from_numpy(a, stored.dtype) for a in (stored.keys, stored.values))
    tree.insert(list(stored.ids), 0, keys, values, top)
    return len(stored.ids)


def unread(tree: FragmentTree, disk: DiskKV | None, ids: Sequence[int]) -> int:
    """How many of `ids` neither the tree nor the disk holds: what a prefill would read."""
    held = tree.match(list(ids)).length
    if disk is not None:
        held = max(held, disk.covered(ids))
    return len(ids) - held


def keep(tree: FragmentTree, disk: DiskKV | None, ids: tuple[int, ...], top: list[Candidate]):
    """Hand the context's KV to the disk when the disk lacks KEEP_AT_LEAST of it."""
    if disk is None or len(ids) - disk.covered(ids) < KEEP_AT_LEAST:
        return
    keys, values = tree.gather(tree.match(list(ids)), len(ids))
    dtype = str(keys.dtype).rsplit(".", 1)[-1]
    best = ([c.token_id for c in top], [c.logprob for c in top])
    disk.keep(ids, _to_numpy(keys), _to_numpy(values), dtype, best)


def _to_numpy(a: mx.array) -> np.ndarray:
    """A copy numpy can hold (bfloat16, which numpy lacks, as its raw 16-bit words)."""
    return np.array(a.view(mx.uint16) if a.dtype == mx.bfloat16 else a)


def _from_numpy(a: np.ndarray, dtype: str) -> mx.array:
    """`_to_numpy` undone, as an MLX array of `dtype`."""
    array = mx.array(a)
    return array.view(mx.bfloat16) if dtype == "bfloat16" else array
