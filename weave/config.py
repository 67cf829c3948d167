"""Settings: config.toml read once into dataclasses, then the environment on top.

This module owns the one configuration path: `load_settings()` reads the TOML file
(`LLOOM_CONFIG` or the repository's config.toml), rejects unknown keys by name, and
`apply_environment` lays environment variables over it in one place. Secrets are not
settings: the OpenAI key is read by the backend registry alone, never stored here.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from weave.ramify import RamifyParams
from weave.search import SearchParams

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config.toml"
BACKEND_NAMES = ("auto", "mlx", "llamacpp", "vllm", "openai")


class ConfigError(ValueError):
    """config.toml or an environment variable holds something we cannot use."""


@dataclass(frozen=True)
class MLXSettings:
    model: str = ""
    cache_dir: str = "~/.cache/lloom"
    kv_cache_mb: int = 1024
    prefill_chunk: int = 256


@dataclass(frozen=True)
class LlamaCppSettings:
    url: str = ""
    timeout: float = 60.0


@dataclass(frozen=True)
class VLLMSettings:
    url: str = ""
    model: str = ""
    timeout: float = 60.0


@dataclass(frozen=True)
class OpenAISettings:
    model: str = "gpt-4o-mini"
    base_url: str = ""
    endpoint: str = "auto"
    timeout: float = 60.0


@dataclass(frozen=True)
class Settings:
    search: SearchParams = field(default_factory=SearchParams)
    model_search: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sample: RamifyParams = field(default_factory=RamifyParams)
    backend: str = "auto"
    mlx: MLXSettings = field(default_factory=MLXSettings)
    llamacpp: LlamaCppSettings = field(default_factory=LlamaCppSettings)
    vllm: VLLMSettings = field(default_factory=VLLMSettings)
    openai: OpenAISettings = field(default_factory=OpenAISettings)
    starting_stories: tuple[str, ...] = ()
    data_dir: Path = Path("~/.local/share/lloom").expanduser()

    @property
    def cache_dir(self) -> Path:
        return Path(self.mlx.cache_dir).expanduser()

    def search_for(self, model: str) -> SearchParams:
        """The search defaults for `model`: [search], then its [models."name"] section."""
        overrides = self.model_search.get(model, {})
        return replace(self.search, **overrides)


def load_settings(path: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read config.toml (or `path`, or $LLOOM_CONFIG) and apply the environment."""
    env = os.environ if env is None else env
    path = path or Path(env.get("LLOOM_CONFIG") or DEFAULT_CONFIG)
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except FileNotFoundError as e:
        raise ConfigError(f"no settings file at {path}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from e
    return apply_environment(settings_from_table(table, str(path)), env)


def settings_from_table(table: Mapping[str, Any], where: str = "config") -> Settings:
    _check_keys(table, {"search", "models", "sample", "backend", "mlx", "llamacpp", "vllm",
                        "openai", "stories", "data"}, where)  # fmt: skip
    models = table.get("models", {})
    for name, section in models.items():
        _check_keys(section, _field_names(SearchParams), f"{where} [models.{name!r}]")
    backend = table.get("backend", {})
    _check_keys(backend, {"name"}, f"{where} [backend]")
    stories = table.get("stories", {})
    _check_keys(stories, {"starting"}, f"{where} [stories]")
    data = table.get("data", {})
    _check_keys(data, {"folder"}, f"{where} [data]")
    settings = Settings(
        search=_section(SearchParams, table, "search", where),
        model_search={name: dict(section) for name, section in models.items()},
        sample=_section(RamifyParams, table, "sample", where),
        backend=_backend_name(backend.get("name", "auto"), where),
        mlx=_section(MLXSettings, table, "mlx", where),
        llamacpp=_section(LlamaCppSettings, table, "llamacpp", where),
        vllm=_section(VLLMSettings, table, "vllm", where),
        openai=_section(OpenAISettings, table, "openai", where),
        starting_stories=tuple(stories.get("starting", ())),
        data_dir=Path(data.get("folder", "~/.local/share/lloom")).expanduser(),
    )
    for name in settings.model_search:
        settings.search_for(name)  # validates each model's overrides now, not mid-session
    return settings


# Environment variable -> (section, key, type). The one place the environment is read.
ENVIRONMENT = {
    "LLOOM_MODEL": ("mlx", "model", str),
    "LLOOM_CACHE_DIR": ("mlx", "cache_dir", str),
    "LLOOM_KV_CACHE_MB": ("mlx", "kv_cache_mb", int),
    "LLAMA_API_URL": ("llamacpp", "url", str),
    "LLAMA_TIMEOUT": ("llamacpp", "timeout", float),
    "VLLM_API_URL": ("vllm", "url", str),
    "VLLM_MODEL": ("vllm", "model", str),
    "VLLM_TIMEOUT": ("vllm", "timeout", float),
    "OPENAI_MODEL": ("openai", "model", str),
    "OPENAI_BASE_URL": ("openai", "base_url", str),
    "OPENAI_ENDPOINT": ("openai", "endpoint", str),
}


def apply_environment(settings: Settings, env: Mapping[str, str]) -> Settings:
    """Lay LLOOM_*, LLAMA_*, VLLM_* and OPENAI_* variables over the file's settings."""
    sections: dict[str, Any] = {}
    for var, (section, key, kind) in ENVIRONMENT.items():
        value = env.get(var, "").strip()
        if not value:
            continue
        try:
            typed = kind(value)
        except ValueError as e:
            raise ConfigError(f"{var}={value!r} is not a valid {kind.__name__}") from e
        current = sections.get(section, getattr(settings, section))
        sections[section] = replace(current, **{key: typed})
    if env.get("LLOOM_BACKEND", "").strip():
        sections["backend"] = _backend_name(env["LLOOM_BACKEND"].strip(), "LLOOM_BACKEND")
    if env.get("LLOOM_DATA_DIR", "").strip():
        sections["data_dir"] = Path(env["LLOOM_DATA_DIR"].strip()).expanduser()
    return replace(settings, **sections)


def _section(cls, table: Mapping[str, Any], name: str, where: str):
    values = table.get(name, {})
    _check_keys(values, _field_names(cls), f"{where} [{name}]")
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where} [{name}]: {e}") from e


def _field_names(cls) -> set[str]:
    return {f.name for f in fields(cls)}


def _check_keys(values: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})"
        )


def _backend_name(name: str, where: str) -> str:
    if name not in BACKEND_NAMES:
        raise ConfigError(f"{where}: backend {name!r} is not one of {', '.join(BACKEND_NAMES)}")
    return name
