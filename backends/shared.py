"""The one backend a process's page sessions share, and switching its MLX model.

The page loads the model once per process and every session uses it. A writer may switch
the MLX backend to another model without a restart: the new one is built first, and only
once it loads is it shared and the old one closed (a search still running on the old one
ends with its "closed" error, and its story loses nothing); a model that cannot be loaded
leaves the old one in place and says why. Owns that holder; building a backend belongs
to `backends.create_backend`, which the caller hands in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from backends.base import Backend

if TYPE_CHECKING:
    from weave.config import Settings


class SharedBackend:
    """The process's backend, built on first use by `create(settings)`."""

    def __init__(self, settings: Settings, create: Callable[[Settings], Backend]) -> None:
        self._settings = settings
        self._create = create
        self._lock = threading.Lock()
        self._backend: Backend | None = None

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    @property
    def model(self) -> str:
        """The `[mlx] model` in use ("" for the embedded model)."""
        return self._settings.mlx.model

    def get(self) -> Backend:
        """The backend, built now if it is not yet. Raises BackendError as `create` does."""
        with self._lock:
            if self._backend is None:
                self._backend = self._create(self._settings)
            return self._backend

    def switch(self, model: str) -> None:
        """Share an MLX backend on `model` from now on. Raises BackendError when it cannot
        be built, leaving the backend in use as it was."""
        with self._lock:
            if self._backend is not None and model == self.model:
                return
            settings = replace(self._settings, mlx=replace(self._settings.mlx, model=model))
            backend = self._create(settings)
            old, self._backend, self._settings = self._backend, backend, settings
        if old is not None:
            old.close()

    def close(self) -> None:
        with self._lock:
            old, self._backend = self._backend, None
        if old is not None:
            old.close()
