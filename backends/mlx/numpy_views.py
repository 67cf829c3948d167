"""numpy over evaluated MLX arrays on CPU, in the arrays' own memory.

numpy's SIMD `exp` is ~15x MLX's CPU one, so the backend's exp-heavy steps (attention's
softmax, SwiGLU, each row's log-softmax) run on numpy in place: `np.asarray` of an
evaluated MLX array is a view of its buffer where the layout allows, and what numpy
writes there, MLX reads. Where numpy had to copy, the callers say what to do instead.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np


def shared_view(array: mx.array) -> np.ndarray | None:
    """A writable numpy view of an evaluated MLX array's own memory, or None where numpy
    could only copy it."""
    view = np.asarray(array)
    return view if not view.flags.owndata and view.flags.writeable else None


def writable(array: mx.array) -> np.ndarray:
    """An evaluated MLX array as numpy that may be overwritten: its own memory where
    numpy can view it, else a copy."""
    view = shared_view(array)
    return view if view is not None else np.array(array)
