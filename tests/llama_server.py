"""llama.cpp's llama-server on the embedded GGUF, for tests and benchmarks.

The binary is built once by scripts/build_llama_server.sh; without it the tests skip
(or fail under CI, where the test command builds it first).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from backends.embedded import embedded_gguf_path
from tests.servers import free_port, required, running
from weave.config import load_settings

VERSION = "11434-avx2"  # scripts/build_llama_server.sh's cache key
SLOTS = 4


def llama_server_binary() -> Path | None:
    binary = load_settings().cache_dir / f"llama.cpp-{VERSION}" / "bin" / "llama-server"
    return binary if binary.exists() else None


@contextmanager
def llama_server(log: Path, *, slots: int = SLOTS, flags: tuple[str, ...] = ()):
    """llama-server with the embedded model on a free loopback port (and any further
    `flags`); yields its URL."""
    binary = required(llama_server_binary(), "llama-server", "scripts/build_llama_server.sh")
    port = free_port()
    command = [
        str(binary), "-m", str(embedded_gguf_path()), "--host", "127.0.0.1",
        "--port", str(port), "-c", str(1024 * slots), "-np", str(slots), "-t", "2", *flags,
    ]  # fmt: skip
    with running(command, f"http://127.0.0.1:{port}", log=log, wait=120) as url:
        yield url
