"""Each backend's section of config.toml as a frozen dataclass: [mlx], [llamacpp],
[vllm] and [openai], every number with its bounds declared on its field (`weave.bounds`).

`weave.config` reads the file and the environment into these (its checks name the key);
the backend registry (`backends`) builds a backend from them. Secrets are not here: the
OpenAI key is read by the registry alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from weave.bounds import Bounded, bounded, one_of

TIMEOUT_S = (0.1, 3600.0)  # a whole request's deadline: past an hour is a mistake (or 1e10)


@dataclass(frozen=True)
class MLXSettings(Bounded):
    model: str = ""
    cache_dir: str = "~/.cache/lloom"
    kv_cache_mb: int = bounded(1024, 0, 1 << 18, "MiB")  # 256 GiB at most
    prefill_chunk: int = bounded(512, 1, 1 << 16, "tokens")
    batch_window_ms: float = bounded(20.0, 0.0, 200.0, "ms")  # a writer waits this per depth
    dequantize_mb: int = bounded(4096, 0, 1 << 20, "MiB")  # float32 made from quantized, on CPU
    # unset: backends.mlx.backend.CPU_READ_WINDOW on a CPU, the whole window on a GPU; 0: the whole
    read_window: int | None = bounded(None, 0, 1 << 20, "tokens")
    kv_disk_mb: int = bounded(2048, 0, 1 << 20, "MiB")  # long stories' KV kept; 0: none


@dataclass(frozen=True)
class LlamaCppSettings(Bounded):
    url: str = ""
    timeout: float = bounded(60.0, *TIMEOUT_S, "s")


@dataclass(frozen=True)
class VLLMSettings(Bounded):
    url: str = ""
    model: str = ""
    timeout: float = bounded(60.0, *TIMEOUT_S, "s")


@dataclass(frozen=True)
class OpenAISettings(Bounded):
    model: str = "gpt-4o-mini"
    base_url: str = ""
    endpoint: str = one_of("auto", "auto", "chat", "completions")
    timeout: float = bounded(60.0, *TIMEOUT_S, "s")
