"""The MLP's SwiGLU (silu(gate) * up) for the MLX backend's forwards on CPU, on numpy.

MLX's CPU backend computes `exp` one element at a time (about 10 ns each here; see
`backends.mlx.attention`), and the sigmoid in SwiGLU runs over every position's whole MLP
width: on SmolLM2-135M a 256-token chunk's 256 x 1,536 gates cost 8.8 ms per layer,
a third of the chunk, where numpy's SIMD `exp` does the same in 0.5 ms. Here the gate
and up projections are evaluated, and numpy writes silu(gate) * up into the gate's own
buffer (a numpy view of an evaluated MLX array shares its memory; nothing else reads
that intermediate), which is returned. Large negative gates overflow exp(-gate) to
infinity, giving 0, silu's limit.

`install(model)` replaces the `swiglu` that the model's mlx-lm module calls (llama,
qwen2, qwen3, phi3 and olmo2 all call it by that name). A gate that is not float32 or
not a plain buffer numpy can view passes to mlx-lm's own. On a GPU nothing is replaced.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from backends.mlx.cpu_routes import route
from backends.mlx.numpy_views import shared_view


def install(model) -> bool:
    """Route `model`'s module's `swiglu` through numpy; False where MLX runs on a GPU or
    the module has none."""
    return route(model, "swiglu", _on_numpy)


def _on_numpy(original):
    def routed(gate: mx.array, up: mx.array) -> mx.array:
        if gate.dtype != mx.float32 or up.dtype != mx.float32 or gate.shape != up.shape:
            return original(gate, up)
        mx.eval(gate, up)
        gates = shared_view(gate)
        if gates is None:  # numpy could only copy: nothing to write the result into
            return original(gate, up)
        swiglu_in_place(gates, np.asarray(up))
        return gate

    return routed


def swiglu_in_place(gates: np.ndarray, ups: np.ndarray) -> None:
    """gates <- gates * sigmoid(gates) * ups, as gates * ups / (1 + exp(-gates))."""
    denominators = np.negative(gates)
    with np.errstate(over="ignore"):
        np.exp(denominators, out=denominators)
    denominators += 1
    np.multiply(gates, ups, out=gates)
    np.divide(gates, denominators, out=gates)
