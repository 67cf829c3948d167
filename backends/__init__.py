"""Backend registry: which backend the settings choose, and building it.

Selection lives here and nowhere else (`choose_backend`); each backend module is
imported only when chosen, so a missing optional package matters only then. The OpenAI
key is read from the environment in exactly one function (`_openai_key`) and handed
straight to the backend: it is never stored in settings, logged or shown.

The MLX backend's package loads OpenBLAS before mlx (`backends.mlx`); importing this
package or the interface (`backends.base`) loads neither, so the engine stays light.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backends.base import Backend, Candidate
from backends.errors import BackendError

if TYPE_CHECKING:  # weave.config imports the search, which imports backends.base
    from weave.config import Settings

__all__ = ["Backend", "BackendError", "Candidate", "Choice", "choose_backend", "create_backend"]

EMBEDDED_NAME = "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class Choice:
    """The backend the settings pick, and why (shown on the page)."""

    name: str
    reason: str


def choose_backend(settings: Settings, env: Mapping[str, str] | None = None) -> Choice:
    """An explicit choice wins; else llama.cpp, vLLM, OpenAI by what is set; else MLX."""
    env = os.environ if env is None else env
    if settings.backend != "auto":
        return Choice(settings.backend, "chosen in settings (LLOOM_BACKEND or config.toml)")
    if settings.llamacpp.url:
        return Choice("llamacpp", "LLAMA_API_URL is set")
    if settings.vllm.url:
        return Choice("vllm", "VLLM_API_URL is set")
    if env.get("OPENAI_API_KEY", "").strip():
        return Choice("openai", "OPENAI_API_KEY is set")
    return Choice("mlx", "the default: local MLX")


def create_backend(settings: Settings, env: Mapping[str, str] | None = None) -> Backend:
    """Build the chosen backend. Raises BackendError when it cannot be used as configured."""
    env = os.environ if env is None else env
    choice = choose_backend(settings, env)
    builders = {
        "mlx": _mlx,
        "llamacpp": _llamacpp,
        "vllm": _vllm,
        "openai": _openai,
    }
    return builders[choice.name](settings, env)


def _mlx(settings: Settings, env: Mapping[str, str]) -> Backend:
    MLXBackend = _load("mlx.backend", "MLXBackend")

    if settings.mlx.model:
        path, name = settings.mlx.model, None  # a folder or a hub id (backends.mlx.loading)
    else:
        from backends.embedded import ensure_embedded_model

        path, name = ensure_embedded_model(settings.cache_dir), EMBEDDED_NAME
    return MLXBackend(
        path,
        display_name=name,
        kv_cache_bytes=settings.mlx.kv_cache_mb << 20,
        prefill_chunk=settings.mlx.prefill_chunk,
        batch_window=settings.mlx.batch_window_ms / 1000,
        dequantize_bytes=settings.mlx.dequantize_mb << 20,
        read_window=settings.mlx.read_window,
        kv_disk=settings.cache_dir / "kv",
        kv_disk_bytes=settings.mlx.kv_disk_mb << 20,
    )


def _llamacpp(settings: Settings, env: Mapping[str, str]) -> Backend:
    LlamaCppBackend = _load("llamacpp", "LlamaCppBackend")

    _require(settings.llamacpp.url, "llamacpp", "LLAMA_API_URL")
    return LlamaCppBackend(
        settings.llamacpp.url,
        timeout=settings.llamacpp.timeout,
    )


def _vllm(settings: Settings, env: Mapping[str, str]) -> Backend:
    VLLMBackend = _load("vllm", "VLLMBackend")

    _require(settings.vllm.url, "vllm", "VLLM_API_URL")
    return VLLMBackend(
        settings.vllm.url, model=settings.vllm.model or None, timeout=settings.vllm.timeout
    )


def _openai(settings: Settings, env: Mapping[str, str]) -> Backend:
    key = _openai_key(env)
    OpenAIBackend = _load("openai", "OpenAIBackend")
    return OpenAIBackend(
        api_key=key,
        model=settings.openai.model,
        base_url=settings.openai.base_url or None,
        endpoint=settings.openai.endpoint,
        timeout=settings.openai.timeout,
    )


def _openai_key(env: Mapping[str, str]) -> str:
    """The one place the OpenAI key is read."""
    key = env.get("OPENAI_API_KEY", "").strip()
    if not key:
        raise BackendError(
            "no API key: set OPENAI_API_KEY (or choose another backend with LLOOM_BACKEND)",
            backend="openai",
        )
    return key


def _load(module: str, cls: str):
    """Import a backend module only when it is chosen; a missing package gets a clear fix."""
    import importlib

    try:
        return getattr(importlib.import_module(f"backends.{module}"), cls)
    except ImportError as e:
        raise BackendError(
            f"not available here: {e}; install the requirements (pip install -r requirements.txt)",
            backend=module.split(".")[0],
        ) from e


def _require(url: str, backend: str, variable: str) -> None:
    if not url:
        raise BackendError(f"no server address: set {variable}", backend=backend)
