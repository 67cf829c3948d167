"""Settings: config.toml read once into dataclasses, then the environment on top.

This module owns the one configuration path: `load_settings()` reads the TOML file
(`LLOOM_CONFIG` or the repository's config.toml, at most MAX_SETTINGS_BYTES), rejects
unknown keys and values of the wrong type or outside their bounds by name (key, file,
what was expected), and `apply_environment` lays environment variables over it in one
place, checked alike (the variable named). Every number has a range, declared on its
field (`weave.bounds`): NaN, infinities and absurd sizes never get past loading.
A model's section applies to the names users give that model (`model_section`).
Secrets are not settings: the OpenAI key is read by the backend registry alone, never
stored here. The one exception is a story database's URL (`[data] url`, or
`LLOOM_DATABASE_URL`), which may carry its password: it is kept out of the settings' repr
and out of every message (`weave.redaction`).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from weave.backend_settings import LlamaCppSettings, MLXSettings, OpenAISettings, VLLMSettings
from weave.bounds import Bound, Bounded, bound_of, bounded, problem, shown
from weave.hosts import checked
from weave.loom.store_sql import DATABASE_SCHEMES, is_database_url
from weave.redaction import redacted
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams
from weave.story.bans import Bans, bans_from_config

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config.toml"
BACKEND_NAMES = ("auto", "mlx", "llamacpp", "vllm", "openai")
MAX_SETTINGS_BYTES = 1 << 20  # a settings file is a few KiB; a device never ends
MAX_KEY_PARTS = 32  # tomllib's cost grows with the square of a dotted key's parts


class ConfigError(ValueError):
    """config.toml or an environment variable holds something we cannot use."""


# Look-ahead's rows per backend when [lookahead] rows is not set (see README, "Look-ahead").
LOOKAHEAD_ROWS = {"mlx": 3, "llamacpp": 0, "vllm": 0, "openai": 0}


@dataclass(frozen=True)
class LookAheadSettings(Bounded):
    rows: int | None = bounded(None, 0, 10, "suggestions")  # None: the backend's default


@dataclass(frozen=True)
class SharingSettings:
    open: bool = False  # true: served beyond loopback without a login, on purpose
    allowed_hosts: tuple[str, ...] = ()  # Host names served besides loopback's (weave.hosts)

    def __post_init__(self) -> None:
        names = tuple(checked(name) for name in self.allowed_hosts)
        for given, name in zip(self.allowed_hosts, names, strict=True):
            if name is None:
                raise ValueError(
                    f"allowed_hosts: {shown(given)} is not a host name or an IP address "
                    "(write it as the browser's address bar shows it, less the scheme, "
                    "port and path: lloom.example.org)"
                )
        object.__setattr__(self, "allowed_hosts", names)


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
    lookahead: LookAheadSettings = field(default_factory=LookAheadSettings)
    sharing: SharingSettings = field(default_factory=SharingSettings)
    starting_stories: tuple[str, ...] = ()
    data_dir: Path = Path("~/.local/share/lloom").expanduser()
    bans: Bans = field(default_factory=Bans)  # [bans]: used beside each story's own
    data_url: str = field(default="", repr=False)  # [data] url: a PostgreSQL database; may
    # hold a password, so never shown ("" : the stories are in data_dir's SQLite file)

    @property
    def stories_at(self) -> str | Path:
        """Where the stories are kept: the database URL when one is set, else the folder."""
        return self.data_url or self.data_dir

    @property
    def cache_dir(self) -> Path:
        return Path(self.mlx.cache_dir).expanduser()

    def lookahead_rows(self, backend: str) -> int:
        """How many suggestions look-ahead searches from on `backend` (a backend's `name`):
        [lookahead] rows or LLOOM_LOOKAHEAD when set, else that backend's default."""
        rows = self.lookahead.rows
        return LOOKAHEAD_ROWS.get(backend, 0) if rows is None else rows

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
    return apply_environment(settings_from_table(_read_toml(path), str(path)), env)


def _read_toml(path: Path) -> dict[str, Any]:
    """The TOML table in the file at `path`, read up to MAX_SETTINGS_BYTES."""
    try:
        with open(path, "rb") as f:  # /dev/zero never ends: read a cap
            data = f.read(MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError as e:
        raise ConfigError(f"no settings file at {path}") from e
    except OSError as e:
        raise ConfigError(f"{path} cannot be read: {e.strerror or e}") from e
    if len(data) > MAX_SETTINGS_BYTES:
        raise ConfigError(f"{path} is longer than {MAX_SETTINGS_BYTES >> 20} MiB: "
                          "not a settings file")  # fmt: skip
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start})") from e
    _check_key_parts(text, path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from e
    except RecursionError as e:
        raise ConfigError(f"{path} is not a settings file: its values nest too deeply") from e


def _check_key_parts(text: str, path: Path) -> None:
    """Refuse a dotted key of more than MAX_KEY_PARTS parts (in a [header] or before an
    '='), which tomllib would take quadratic time and memory over."""
    for number, line in enumerate(text.splitlines(), 1):
        line = line.lstrip()
        key = line if line.startswith("[") else line.partition("=")[0] if "=" in line else ""
        if key.count(".") >= MAX_KEY_PARTS:
            raise ConfigError(f"{path} line {number}: a key of more than {MAX_KEY_PARTS} "
                              "parts is not a setting")  # fmt: skip


def settings_from_table(table: Mapping[str, Any], where: str = "config") -> Settings:
    _check_keys(table, {"search", "models", "sample", "backend", "mlx", "llamacpp", "vllm",
                        "openai", "lookahead", "stories", "data", "sharing", "bans"},
                 where)  # fmt: skip
    models = _table(table, "models", where)
    model_search = {
        name: _values(SearchParams, _table(models, name, f"{where} [models]"),
                      f"{where} [models.{shown(name)}]")
        for name in models
    }  # fmt: skip
    backend = _table(table, "backend", where)
    _check_keys(backend, {"name"}, f"{where} [backend]")
    stories = _table(table, "stories", where)
    _check_keys(stories, {"starting"}, f"{where} [stories]")
    starting = stories.get("starting", [])
    if not isinstance(starting, list) or not all(isinstance(t, str) for t in starting):
        raise ConfigError(f"{where} [stories] starting: expected a list of text")
    data = _table(table, "data", where)
    _check_keys(data, {"folder", "url"}, f"{where} [data]")
    folder = _typed(data.get("folder", "~/.local/share/lloom"), str, f"{where} [data] folder")
    url = _database_url(_typed(data.get("url", ""), str, f"{where} [data] url"),
                        f"{where} [data] url")  # fmt: skip
    try:
        bans = bans_from_config(_table(table, "bans", where))
    except ValueError as e:
        raise ConfigError(f"{where} [bans] {str(e).removeprefix('bans: ')}") from e
    return Settings(
        search=_section(SearchParams, table, "search", where),
        model_search=model_search,
        sample=_section(RamifyParams, table, "sample", where),
        backend=_backend_name(
            _typed(backend.get("name", "auto"), str, f"{where} [backend] name"), where
        ),
        mlx=_section(MLXSettings, table, "mlx", where),
        llamacpp=_section(LlamaCppSettings, table, "llamacpp", where),
        vllm=_section(VLLMSettings, table, "vllm", where),
        openai=_section(OpenAISettings, table, "openai", where),
        lookahead=_section(LookAheadSettings, table, "lookahead", where),
        sharing=_section(SharingSettings, table, "sharing", where),
        starting_stories=tuple(starting),
        data_dir=Path(folder).expanduser(),
        bans=bans,
        data_url=url,
    )


def _database_url(url: str, where: str) -> str:
    """A story database's URL ("" for none), checked to name PostgreSQL (shown redacted)."""
    url = url.strip()
    if url and not is_database_url(url):
        raise ConfigError(f"{where}: {shown(redacted(url))} is not a database URL (it begins "
                          f"with {' or '.join(DATABASE_SCHEMES)})")  # fmt: skip
    return url


# Environment variable -> (section, key, type): the variables the settings take, laid over
# them in `apply_environment`. Not every variable: the backend registry reads OPENAI_API_KEY
# (a secret, never a setting) when it chooses and builds a backend (`backends`).
ENVIRONMENT = {
    "LLOOM_MODEL": ("mlx", "model", str),
    "LLOOM_CACHE_DIR": ("mlx", "cache_dir", str),
    "LLOOM_KV_CACHE_MB": ("mlx", "kv_cache_mb", int),
    "LLOOM_READ_WINDOW": ("mlx", "read_window", int),
    "LLOOM_KV_DISK_MB": ("mlx", "kv_disk_mb", int),
    "LLAMA_API_URL": ("llamacpp", "url", str),
    "LLAMA_TIMEOUT": ("llamacpp", "timeout", float),
    "VLLM_API_URL": ("vllm", "url", str),
    "VLLM_MODEL": ("vllm", "model", str),
    "VLLM_TIMEOUT": ("vllm", "timeout", float),
    "OPENAI_MODEL": ("openai", "model", str),
    "OPENAI_BASE_URL": ("openai", "base_url", str),
    "OPENAI_ENDPOINT": ("openai", "endpoint", str),
    "OPENAI_TIMEOUT": ("openai", "timeout", float),
    "LLOOM_LOOKAHEAD": ("lookahead", "rows", int),
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
            raise ConfigError(f"{var}={shown(value)} is not a valid {kind.__name__}") from e
        current = sections.get(section, getattr(settings, section))
        bound = bound_of(type(current), key)
        if bound is not None:
            _check(var, typed, bound)
        sections[section] = replace(current, **{key: typed})
    if env.get("LLOOM_BACKEND", "").strip():
        sections["backend"] = _backend_name(env["LLOOM_BACKEND"].strip(), "LLOOM_BACKEND")
    if env.get("LLOOM_DATA_DIR", "").strip():
        sections["data_dir"] = Path(env["LLOOM_DATA_DIR"].strip()).expanduser()
    if env.get("LLOOM_DATABASE_URL", "").strip():
        sections["data_url"] = _database_url(env["LLOOM_DATABASE_URL"], "LLOOM_DATABASE_URL")
    return replace(settings, **sections)


def _section(cls, table: Mapping[str, Any], name: str, where: str):
    values = _values(cls, _table(table, name, where), f"{where} [{name}]")
    try:
        return cls(**values)
    except ValueError as e:  # a value the class itself checks (host names)
        raise ConfigError(f"{where} [{name}] {e}") from None


def _values(cls, values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`values` for the fields of `cls`, each of its field's type and inside its bounds
    (an int given for a float field becomes a float)."""
    _check_keys(values, _field_names(cls), where)
    kinds = {f.name: _field_type(f) for f in fields(cls)}
    checked = {}
    for key, value in values.items():
        checked[key] = _typed(value, kinds[key], f"{where} {key}")
        bound = bound_of(cls, key)
        if bound is not None:
            _check(f"{where} {key}", checked[key], bound)
    return checked


def _check(name: str, value: Any, bound: Bound) -> None:
    wrong = problem(name, value, bound)
    if wrong:
        raise ConfigError(wrong)


def _table(parent: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    """`parent[name]` when it is a table (absent: an empty one)."""
    value = parent.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where}: {name} = {shown(value)} should be a table ([{name}] and its keys)"
        )
    return value


def _field_type(f) -> type:
    if f.default is not None:
        return type(f.default)
    return int if str(f.type).startswith("int") else bool


def _typed(value: Any, kind: type, where: str) -> Any:
    """`value` when it is a `kind` (an int is a float too, made one; a bool is not a number)."""
    kinds = (int, float) if kind is float else (kind,)
    if isinstance(value, str) and kind is str and "\0" in value:
        raise ConfigError(f"{where}: a NUL character cannot be in a name or path")
    if isinstance(value, kinds) and (kind is bool or not isinstance(value, bool)):
        return float(value) if kind is float else value
    if kind is tuple and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    names = {str: "text", int: "a whole number", float: "a number", bool: "true or false",
             tuple: "a list of text"}  # fmt: skip
    raise ConfigError(f"{where}: expected {names.get(kind, kind.__name__)}, got {shown(value)}")


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
        raise ConfigError(
            f"{where}: backend {shown(name)} is not one of {', '.join(BACKEND_NAMES)}"
        )
    return name
