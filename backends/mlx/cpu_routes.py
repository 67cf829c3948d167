"""Routing a function that an mlx-lm model's module calls through our own, on CPU.

mlx-lm's model modules call module-level functions (`scaled_dot_product_attention`,
`swiglu`) by name, so replacing the name in the module replaces it for every forward of
that architecture in the process. `route` does that once per module and name, keeping
the original for the wrapper to fall back on; on a GPU it leaves MLX's fused kernels be.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import mlx.core as mx

ROUTED = "_lloom_routed"


def route(model, name: str, wrap: Callable[[Callable], Callable]) -> bool:
    """Replace `name` in `model`'s module by `wrap(original)`; False where MLX runs on a
    GPU or the module has no such function. Routing again changes nothing."""
    if mx.default_device() != mx.cpu:
        return False
    module = sys.modules.get(type(model).__module__)
    original = getattr(module, name, None)
    if original is None:
        return False
    if not getattr(original, ROUTED, False):
        routed = wrap(original)
        setattr(routed, ROUTED, True)
        setattr(module, name, routed)
    return True
