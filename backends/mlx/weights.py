"""How an mlx-lm model's weights are held for the MLX backend on CPU, and what it runs.

MLX's CPU backend has no fast kernel for quantized or half-precision matmuls: on a
Qwen2.5-0.5B-shaped model a 4-bit search took 6-8x as long as on float32 weights (one
896 x 4,864 layer, 32 rows: 120 ms in 4-bit, 2.1 ms in float32 on OpenBLAS), and
bfloat16 or float16 weights are slow too. So on CPU, where the float32 weights fit the
budget (`[mlx] dequantize_mb`), every quantized layer is dequantized once, at load, by
mlx-lm's own `dequantize_model`, and every floating-point parameter is cast to float32:
the forwards are then exactly those of mlx-lm on the dequantized weights, at float32
speed. Dequantizing each layer on the fly instead (into a fresh buffer each forward,
then BLAS) was measured too: it pays the whole model's dequantization at every forward
(see `bench/bench_mlx.py models`). Where the budget does not fit, the weights are kept
as they are and `ModelInfo.note` says so. On a GPU MLX's own kernels are the fast path:
nothing changes there.

Owns that choice and `ModelInfo`; loading the model belongs to `backends.mlx.backend`.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten
from mlx_lm.utils import dequantize_model, get_total_parameters

FLOAT32_BYTES = 4
HALF = (mx.float16, mx.bfloat16)


@dataclass(frozen=True)
class ModelInfo:
    """What the MLX backend runs, for the page and the log.

    `bits` is the quantization the model was stored in (None: not quantized), `dtype` the
    weights' float type as they are run, `memory_bytes` what the weights hold now, and
    `note` one line saying how they are run (and, where the budget did not allow float32,
    that the forwards are slow: `slow`)."""

    name: str
    parameters: int
    dtype: str
    bits: int | None
    memory_bytes: int
    dequantized: bool
    note: str
    slow: bool = False  # quantized or half weights kept on CPU: several times slower

    @property
    def facts(self) -> str:
        """One line for the page: parameters, the weights as run (and as stored), memory."""
        n = self.parameters
        size = f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M" if n >= 1e6 else f"{n:,}"
        weights = self.dtype if self.bits is None else f"{self.bits}-bit"
        if self.dequantized and self.bits is not None:
            weights = f"{self.dtype} (from {weights})"
        mib = self.memory_bytes / 2**20
        return f"{size} parameters · {weights} · {mib:,.{1 if mib < 10 else 0}f} MiB"


def prepare(model: nn.Module, name: str, budget_bytes: int) -> ModelInfo:
    """Dequantize `model` to float32 in place where MLX runs on CPU, its weights are
    quantized or half-precision, and float32 fits `budget_bytes`. Returns what it runs."""
    parameters = get_total_parameters(model)
    bits = _bits(model)
    stored = _float_dtype(model)
    kind = f"{bits}-bit" if bits is not None else _name(stored)
    float32 = parameters * FLOAT32_BYTES
    dequantized = slow = False
    if bits is None and stored not in HALF:
        note = f"{kind} weights"
    elif mx.default_device() != mx.cpu:
        note = f"{kind} weights, on MLX's GPU kernels"
    elif float32 > budget_bytes:
        slow = True
        note = (
            f"{kind} weights kept: float32 would take {float32 >> 20} MiB, over "
            f"[mlx] dequantize_mb = {budget_bytes >> 20}, and MLX's CPU runs {kind} "
            "matmuls several times slower than float32"
        )
    else:
        dequantize_model(model)
        model.set_dtype(mx.float32)
        mx.eval(model.parameters())
        dequantized = True
        note = f"{kind} weights dequantized to float32 at load ({float32 >> 20} MiB)"
    held = sum(a.nbytes for _, a in tree_flatten(model.parameters()))
    dtype = _name(_float_dtype(model))
    return ModelInfo(name, parameters, dtype, bits, held, dequantized, note, slow)


def _name(dtype: mx.Dtype) -> str:
    return str(dtype).removeprefix("mlx.core.")


def _bits(model: nn.Module) -> int | None:
    """The widest quantization among the model's layers (None: none is quantized)."""
    bits = [
        m.bits
        for _, m in model.named_modules()
        if isinstance(m, nn.QuantizedLinear | nn.QuantizedEmbedding)
    ]
    return max(bits) if bits else None


def _float_dtype(model: nn.Module) -> mx.Dtype:
    """The float type most of the model's floating-point parameters are in."""
    sizes: dict[mx.Dtype, int] = {}
    for _, array in tree_flatten(model.parameters()):
        if mx.issubdtype(array.dtype, mx.floating):
            sizes[array.dtype] = sizes.get(array.dtype, 0) + array.size
    return max(sizes, key=sizes.get) if sizes else mx.float32
