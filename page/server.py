"""The page server's set-up, once per process: what lloom.py's `app` is served with, and
what every session shares.

`middleware` is the server's own middleware: `page.hosts.HostGuard` first, refusing a
request that names a foreign Host, with the names the settings allow, read once when the
server starts (settings that cannot be read allow loopback names only; the page then says
what is wrong with them). The rest are `st.cache_resource`s, one of each per process,
which every session shares: the settings, the backend (`shared_backend`), the story store,
the mlx-lm models on this machine and the files of page/static/. `login_configured` says
whether the server's secrets configure st.login (a group's page). Nothing here draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st
from starlette.middleware import Middleware

import backends
from backends.shared import SharedBackend
from page.hosts import HostGuard
from weave.config import ConfigError, Settings, load_settings
from weave.desk.library import open_store
from weave.loom.store import LoomStore

if TYPE_CHECKING:  # the catalog imports mlx: only the MLX backend's page loads it
    from backends.mlx.catalog import LocalModel

STATIC = Path(__file__).resolve().parent / "static"


def middleware() -> list[Middleware]:
    """The page server's own middleware: the Host guard, with the settings' names."""
    try:
        allowed = frozenset(load_settings().sharing.allowed_hosts)
    except ConfigError:
        allowed = frozenset()
    return [Middleware(HostGuard, allowed=allowed)]


@st.cache_resource(show_spinner=False)
def shared_settings() -> Settings:
    return load_settings()


def release(shared: SharedBackend) -> None:
    """Close the backend when its cache entry is cleared (tests do)."""
    shared.close()


@st.cache_resource(show_spinner=False, on_release=release)
def shared_backend() -> SharedBackend:
    """The one backend every session uses (the MLX backend serialises its own work), built
    on first use; a writer may switch its MLX model (`page.sidebar.switch_model_ui`)."""
    return SharedBackend(shared_settings(), backends.create_backend)


@st.cache_resource(ttl=60, show_spinner=False)  # not cache_data: see page.graphs' docstring
def models_here(configured: str, hub: str) -> tuple[LocalModel, ...]:
    """The mlx-lm models on this machine (`backends.mlx.catalog`): the configured one, the
    embedded one and those in the Hugging Face cache `hub`; read once a minute."""
    from backends.mlx.catalog import local_models

    return tuple(local_models(configured, backends.EMBEDDED_NAME, Path(hub)))


@st.cache_resource(show_spinner=False)
def shared_store() -> tuple[LoomStore, str | None]:
    """The story store (the data folder's, or a database server's), or a temporary folder's
    with the reason the data folder failed. A server that fails raises: the next run tries
    again (`store_or_stop`)."""
    return open_store(shared_settings().stories_at)


@st.cache_resource(show_spinner=False)
def static_text(name: str) -> str:
    """A file of page/static/ (the desk's CSS, the story box's script), read once per process."""
    return (STATIC / name).read_text()


def login_configured() -> bool:
    """Whether `.streamlit/secrets.toml` configures st.login (a group's page)."""
    return bool(st.secrets.load_if_toml_exists() and "auth" in st.secrets)
