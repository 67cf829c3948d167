"""Settings: config.toml read once into dataclasses, then the environment on top.

This module owns the one configuration path: `load_settings()` reads the TOML file
(`LLOOM_CONFIG` or the repository's config.toml), rejects unknown keys and values of
the wrong type or range by name (key, file, what was expected), and
`apply_environment` lays environment variables over it in one place, checked alike.
A model's section applies to the names users give that model (`model_section`).
Secrets are not settings: the OpenAI key is read by the backend registry alone, never
stored here.
"""

from __future__ import annotations

import math
import os
import re
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
    prefill_chunk: int = 512
    batch_window_ms: float = 20.0
    dequantize_mb: int = 4096


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
        section = self.model_section(model)
        return replace(self.search, **self.model_search.get(section, {}))

    def model_section(self, model: str) -> str | None:
        """The [models."name"] section that applies to `model`, or None: names match as
        users write them (any case, a path's last part, less .gguf and a quantisation
        suffix such as .Q4_1 or -f16), an exact name first."""
        if model in self.model_search:
            return model
        wanted = model_key(model)
        return next((name for name in self.model_search if model_key(name) == wanted), None)


QUANT_SUFFIX = re.compile(
    r"[.\-_](?:i?q\d[\w]*|f16|f32|bf16|fp16|fp32|\d+bit|gguf|mlx)$", re.IGNORECASE
)


def model_key(name: str) -> str:
    """A model name as it is matched: "models/SmolLM2-135M-Instruct.Q4_1.gguf" and
    "smollm2-135m-instruct" are the same model."""
    key = name.strip().replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()
    key = key.removesuffix(".gguf")
    while QUANT_SUFFIX.search(key):
        key = QUANT_SUFFIX.sub("", key)
    return key


def load_settings(path: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read config.toml (or `path`, or $LLOOM_CONFIG) and apply the environment."""
    env = os.environ if env is None else env
    path = path or Path(env.get("LLOOM_CONFIG") or DEFAULT_CONFIG)
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except FileNotFoundError as e:
        raise ConfigError(f"no settings file at {path}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start})") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from e
    except OSError as e:
        raise ConfigError(f"{path} cannot be read: {e.strerror or e}") from e
    return apply_environment(settings_from_table(table, str(path)), env)


def settings_from_table(table: Mapping[str, Any], where: str = "config") -> Settings:
    _check_keys(table, {"search", "models", "sample", "backend", "mlx", "llamacpp", "vllm",
                        "openai", "stories", "data"}, where)  # fmt: skip
    models = _table(table, "models", where)
    for name, section in models.items():
        _check_keys(_table(models, name, f"{where} [models]"), _field_names(SearchParams),
                    f"{where} [models.{name!r}]")  # fmt: skip
        _check_types(SearchParams, section, f"{where} [models.{name!r}]")
    backend = _table(table, "backend", where)
    _check_keys(backend, {"name"}, f"{where} [backend]")
    stories = _table(table, "stories", where)
    _check_keys(stories, {"starting"}, f"{where} [stories]")
    starting = stories.get("starting", [])
    if not isinstance(starting, list) or not all(isinstance(t, str) for t in starting):
        raise ConfigError(f"{where} [stories] starting: expected a list of text")
    data = _table(table, "data", where)
    _check_keys(data, {"folder"}, f"{where} [data]")
    folder = _typed(data.get("folder", "~/.local/share/lloom"), str, f"{where} [data] folder")
    settings = Settings(
        search=_section(SearchParams, table, "search", where),
        model_search={name: dict(section) for name, section in models.items()},
        sample=_section(RamifyParams, table, "sample", where),
        backend=_backend_name(
            _typed(backend.get("name", "auto"), str, f"{where} [backend] name"), where
        ),
        mlx=_section(MLXSettings, table, "mlx", where),
        llamacpp=_section(LlamaCppSettings, table, "llamacpp", where),
        vllm=_section(VLLMSettings, table, "vllm", where),
        openai=_section(OpenAISettings, table, "openai", where),
        starting_stories=tuple(starting),
        data_dir=Path(folder).expanduser(),
    )
    for name in settings.model_search:
        try:
            settings.search_for(name)  # validates each model's overrides now, not mid-session
        except ValueError as e:
            raise ConfigError(f"{where} [models.{name!r}]: {e}") from e
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
    "OPENAI_TIMEOUT": ("openai", "timeout", float),
}

# (section, key) -> (the rule, what it says when broken); checked in the file and in the
# environment alike.
LIMITS = {
    ("mlx", "kv_cache_mb"): (lambda v: v >= 0, "a whole number of MiB, 0 or more"),
    ("mlx", "prefill_chunk"): (lambda v: v > 0, "a whole number of tokens above 0"),
    ("mlx", "dequantize_mb"): (lambda v: v >= 0, "a whole number of MiB, 0 or more"),
    ("mlx", "batch_window_ms"): (
        lambda v: math.isfinite(v) and v >= 0,
        "milliseconds: a finite number, 0 or more",
    ),
    **{
        (section, "timeout"): (
            lambda v: math.isfinite(v) and v > 0,
            "seconds: a finite number above 0",
        )
        for section in ("llamacpp", "vllm", "openai")
    },
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
        _check_limit(section, key, typed, var)
        current = sections.get(section, getattr(settings, section))
        sections[section] = replace(current, **{key: typed})
    if env.get("LLOOM_BACKEND", "").strip():
        sections["backend"] = _backend_name(env["LLOOM_BACKEND"].strip(), "LLOOM_BACKEND")
    if env.get("LLOOM_DATA_DIR", "").strip():
        sections["data_dir"] = Path(env["LLOOM_DATA_DIR"].strip()).expanduser()
    return replace(settings, **sections)


def _section(cls, table: Mapping[str, Any], name: str, where: str):
    values = _table(table, name, where)
    _check_keys(values, _field_names(cls), f"{where} [{name}]")
    _check_types(cls, values, f"{where} [{name}]")
    for key, value in values.items():
        _check_limit(name, key, value, f"{where} [{name}] {key}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where} [{name}]: {e}") from e


def _table(parent: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    """`parent[name]` when it is a table (absent: an empty one)."""
    value = parent.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {name} = {value!r} should be a table ([{name}] and its keys)")
    return value


def _check_types(cls, values: Mapping[str, Any], where: str) -> None:
    """Each value has its field's type: that of the field's default (None: the other type
    its annotation names, `int | None` or `bool | None`)."""
    kinds = {f.name: _field_type(f) for f in fields(cls)}
    for key, value in values.items():
        _typed(value, kinds[key], f"{where} {key}")


def _field_type(f) -> type:
    if f.default is not None:
        return type(f.default)
    return int if str(f.type).startswith("int") else bool


def _typed(value: Any, kind: type, where: str) -> Any:
    """`value` when it is a `kind` (an int is a float too; a bool is not a number)."""
    kinds = (int, float) if kind is float else (kind,)
    if isinstance(value, kinds) and (kind is bool or not isinstance(value, bool)):
        return value
    names = {str: "text", int: "a whole number", float: "a number", bool: "true or false"}
    raise ConfigError(f"{where}: expected {names.get(kind, kind.__name__)}, got {value!r}")


def _check_limit(section: str, key: str, value: Any, where: str) -> None:
    rule = LIMITS.get((section, key))
    if rule is not None and not rule[0](value):
        raise ConfigError(f"{where} = {value!r}: expected {rule[1]}")


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
