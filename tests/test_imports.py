"""Importing the engine or the page loads neither mlx nor OpenBLAS: a page or a command
line on a remote backend never pays for them, and the MLX package loads OpenBLAS itself.

Each check runs in a fresh interpreter, since this test process has long loaded both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from backends.mlx import openblas

ROOT = Path(__file__).resolve().parent.parent

REPORT = """
import importlib, pkgutil, sys
import weave
for module in pkgutil.walk_packages(weave.__path__, "weave."):
    if module.name != "weave.__main__":  # that one runs the command line
        importlib.import_module(module.name)
{imports}
maps = open("/proc/self/maps").read()
print("openblas" if "libopenblas" in maps else "-", "mlx" if "mlx.core" in sys.modules else "-")
"""


def loaded_after(imports: str) -> list[str]:
    """What a fresh interpreter has loaded after importing every weave module and `imports`."""
    done = subprocess.run(
        [sys.executable, "-c", REPORT.format(imports=imports)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_engine_the_page_and_the_remote_backends_load_no_openblas_and_no_mlx():
    imports = (
        "import lloom, backends, backends.shared, backends.llamacpp, backends.vllm, backends.openai"
    )
    assert loaded_after(imports) == ["-", "-"]


def test_the_mlx_package_loads_openblas_before_mlx():
    expected = "openblas" if openblas.preload().startswith("OpenBLAS preloaded") else "-"
    assert loaded_after("import backends.mlx.backend") == [expected, "mlx"]


def test_the_store_loads_no_file_format_and_no_bans():
    """The store is the bottom: importing it loads none of `weave.interop`'s readers and
    nothing of `weave.story` (the bans compiler, the steering) or above."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, weave.loom.store; print(*sorted(sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    loaded = {m for m in done.stdout.split() if m.startswith("weave.")}
    assert "weave.loom.store" in loaded
    above = ("weave.interop", "weave.story", "weave.search", "weave.view", "weave.desk")
    assert [m for m in loaded if m.startswith(above)] == []
    assert not {"re2", "psycopg"} & set(done.stdout.split())
