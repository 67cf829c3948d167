"""Finding and loading the writer's mlx-lm model for the MLX backend, or saying in one
line why not.

A model is named as mlx-lm names it: a folder, or a Hugging Face hub id
(`mlx-community/Qwen2.5-1.5B-Instruct-4bit`) looked up in the local cache first
(`HF_HUB_CACHE`/`HF_HOME`); offline (`HF_HUB_OFFLINE=1`) an id that is not there is an
error naming it, and so is a hub that fails mid-download (a dropped connection). The
folder's `config.json` is checked before mlx-lm reads it (an object no deeper than
`replies.MAX_DEPTH`, a `model_type`, numbers where sizes go, sizes above 0), and only the
families whose forwards the
backend runs exactly (`FAMILIES`, each guarded by tests/test_mlx_families.py) are
loaded: any other is refused by name rather than run wrong.

Owns naming, checking and loading; running the model belongs to `backends.mlx.backend`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mlx_lm.models.cache import KVCache
from mlx_lm.utils import DEFAULT_ALLOW_PATTERNS, load

from backends import replies
from backends.errors import BackendError

# mlx-lm's model modules whose forwards the backend runs exactly (its batched caches,
# attention and head); mlx-lm maps more model types onto these (mistral -> llama).
FAMILIES = frozenset(
    f"mlx_lm.models.{name}"
    for name in (
        "llama",
        "qwen2",
        "qwen3",
        "gemma",
        "gemma2",
        "gemma3_text",
        "phi3",
        "olmo2",
        "granite",
    )
)
# config.json keys that must hold numbers where they are present (sizes: whole numbers).
WHOLE = (
    "hidden_size",
    "num_hidden_layers",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
)
REAL = ("rms_norm_eps", "rope_theta")


@dataclass(frozen=True)
class Loaded:
    """A loaded model, its tokenizer, its folder and its checked config.json."""

    model: object
    tokenizer: object
    folder: Path
    config: dict

    @property
    def sliding(self) -> bool:
        """Whether some layers attend within a window (mlx-lm gives them rotating caches)."""
        make_cache = getattr(self.model, "make_cache", None)
        return make_cache is not None and any(not isinstance(c, KVCache) for c in make_cache())


def fail(message: str, folder: Path | None = None) -> BackendError:
    """One line naming the folder (as the error's address), file or hub id."""
    return BackendError(message, backend="mlx", url=str(folder) if folder else None)


def model_folder(name: str) -> Path:
    """The folder `name` means: itself where it is a folder, else a hub id's snapshot."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if path.is_absolute() or name.startswith(".") or name.count("/") != 1:
        raise fail(f"no model folder at {name} (LLOOM_MODEL / [mlx] model)")
    import httpx2  # huggingface_hub's HTTP client
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HFValidationError

    offline = constants.HF_HUB_OFFLINE  # HF_HUB_OFFLINE, as huggingface_hub read it
    try:
        return Path(
            snapshot_download(name, local_files_only=offline, allow_patterns=DEFAULT_ALLOW_PATTERNS)
        )
    except HFValidationError as e:
        message = f"{name!r} is neither a folder nor a hub id (LLOOM_MODEL / [mlx] model)"
        raise fail(message) from e
    except OSError as e:  # LocalEntryNotFoundError, HfHubHTTPError: both OSError
        where = "in the local Hugging Face cache" if offline else "on the hub or in the cache"
        detail = "" if offline else f" ({str(e).splitlines()[0]})"
        message = f"model {name} is not {where}{detail}; set LLOOM_MODEL to a folder"
        raise fail(message) from e
    except httpx2.HTTPError as e:  # the hub dropped the connection, or answered junk
        hub = constants.ENDPOINT
        message = (
            f"the model hub at {hub} failed while fetching {name} ({str(e) or type(e).__name__})"
        )
        raise fail(message + "; try again, or set LLOOM_MODEL to a folder") from e


def read_config(folder: Path) -> dict:
    """config.json, checked enough that mlx-lm's reading it cannot end in a traceback."""
    path = folder / "config.json"
    try:
        data = path.read_bytes()
        if replies.too_deep(data):  # the parser recurses: a deep file ends it in a traceback
            raise fail(f"{path} is JSON nested over {replies.MAX_DEPTH} levels deep, or unbalanced")
        config = json.loads(data)
    except (OSError, ValueError) as e:
        raise fail(f"cannot read {path}: {e}") from e
    if not isinstance(config, dict):
        raise fail(f"{path} holds a {type(config).__name__}, not a JSON object")
    if "model_type" not in config:
        raise fail(f"{path} lacks model_type")
    for key in WHOLE + REAL:
        value = config.get(key)
        kinds = int if key in WHOLE else (int, float)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise fail(f"{path}: {key} is {value!r}, not a number")
        if key in WHOLE and value is not None and value < 1:  # a size: mlx-lm divides by some
            raise fail(f"{path}: {key} is {value!r}, not a size (a whole number above 0)")
    if not isinstance(config["model_type"], str):
        raise fail(f"{path}: model_type is {config['model_type']!r}, not a name")
    return config


def load_checked(name: str) -> Loaded:
    """Find, check and load the model `name`. Raises BackendError in one line."""
    folder = model_folder(name)
    config = read_config(folder)
    try:
        model, tokenizer = load(str(folder))
    except (TypeError, KeyError, ArithmeticError) as e:  # its arguments, from config.json
        message = f"its config.json does not describe a model mlx-lm can build ({e})"
        raise fail(message, folder) from e
    except (ValueError, OSError, RuntimeError) as e:  # mlx: RuntimeError
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise fail(
            f"cannot load an mlx-lm model from this folder ({first}); set LLOOM_MODEL to an "
            "mlx-lm folder or hub id, or leave it empty for the embedded model",
            folder,
        ) from e
    family = type(model).__module__
    if family not in FAMILIES:
        known = ", ".join(sorted(f.rsplit(".", 1)[1] for f in FAMILIES))
        raise fail(
            f"model type {config['model_type']!r} ({family}) is not one LLooM runs exactly "
            f"on MLX; it runs {known}",
            folder,
        )
    return Loaded(model, tokenizer, folder, config)
