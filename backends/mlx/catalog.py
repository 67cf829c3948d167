"""The mlx-lm models on this machine that a writer can switch to on the page.

Three places hold them: the model the settings name (`[mlx] model` or LLOOM_MODEL: a
folder or a hub id), the embedded model, and the local Hugging Face cache
(`HF_HUB_CACHE`, or `HF_HOME`'s hub folder), where a repository counts when the snapshot
its `main` ref names holds a `config.json` of a family the MLX backend runs exactly
(`backends.mlx.loading.FAMILIES`, the model class mlx-lm would build for it) and
safetensors weights. Listing reads a few small files: nothing is downloaded, nothing
loaded. Owns the list; loading a model belongs to `backends.mlx.loading`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mlx_lm.utils import _get_classes

from backends.mlx.loading import FAMILIES

EMBEDDED = ""  # the `[mlx] model` value that means the embedded model


@dataclass(frozen=True)
class LocalModel:
    """A model the MLX backend can load here: `name` as `[mlx] model` takes it."""

    name: str
    label: str


def local_models(configured: str, embedded_label: str, hub_cache: Path) -> list[LocalModel]:
    """The settings' model first (when one is named), the embedded model, then the hub
    cache's mlx-lm models by id; each name once."""
    found = [LocalModel(EMBEDDED, f"{embedded_label} (embedded)")]
    if configured:
        found.insert(0, LocalModel(configured, f"{configured} (settings)"))
    found += [LocalModel(repo, f"{repo} (Hugging Face cache)") for repo in cached_repos(hub_cache)]
    once: dict[str, LocalModel] = {}
    for model in found:
        once.setdefault(model.name, model)
    return list(once.values())


def cached_repos(hub_cache: Path) -> list[str]:
    """The hub ids in `hub_cache` whose `main` snapshot is an mlx-lm model LLooM runs."""
    try:
        folders = sorted(hub_cache.glob("models--*--*"))
    except OSError:
        return []
    return [
        folder.name.removeprefix("models--").replace("--", "/", 1)
        for folder in folders
        if runnable(snapshot(folder))
    ]


def snapshot(repo_folder: Path) -> Path | None:
    """The snapshot folder the repository's `main` ref names (None: no such ref)."""
    try:
        commit = (repo_folder / "refs" / "main").read_text().strip()
    except OSError:
        return None
    folder = repo_folder / "snapshots" / commit
    return folder if commit and folder.is_dir() else None


def runnable(folder: Path | None) -> bool:
    """Whether `folder` holds safetensors and a config.json of a family LLooM runs."""
    if folder is None or not any(folder.glob("*.safetensors")):
        return False
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        return False
    try:
        model_class, _ = _get_classes(config)  # mlx-lm's own choice, as loading makes it
    except ValueError:  # a model type mlx-lm does not have
        return False
    return model_class.__module__ in FAMILIES
