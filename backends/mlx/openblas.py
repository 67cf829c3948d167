"""Make MLX's CPU backend use Debian's OpenBLAS.

The `mlx-cpu` wheel bundles a slow reference BLAS; loading OpenBLAS into the process
first (RTLD_GLOBAL, before `import mlx`) makes float32 matmuls about 10x faster on
Linux. This module owns that one trick and the note saying whether it worked. Importing
it loads nothing: the MLX package calls `preload` when it is first imported (see
`backends.mlx`), before any of its modules imports mlx, so only a process that builds the
MLX backend (or reads its model catalog) loads OpenBLAS.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/libopenblas.so.0",
)
INSTALL_HINT = "apt-get install libopenblas0-pthread"


@functools.cache
def preload() -> str:
    """Load OpenBLAS if mlx is not imported yet; return a one-line note for the status.
    Once per process: later calls return the first call's note."""
    if not sys.platform.startswith("linux"):
        return "Apple silicon or other: MLX uses its own accelerated kernels"
    if "mlx.core" in sys.modules and not _loaded():
        return "OpenBLAS not preloaded (mlx was imported first): slow CPU matmuls"
    for path in CANDIDATES:
        if os.path.exists(path):
            ctypes.CDLL(path, mode=os.RTLD_GLOBAL)
            return f"OpenBLAS preloaded ({path})"
    return f"OpenBLAS not found: CPU matmuls run 5-10x slower ({INSTALL_HINT})"


def _loaded() -> bool:
    try:
        with open("/proc/self/maps") as maps:
            return "libopenblas" in maps.read()
    except OSError:
        return False
