"""Shared fixtures: the real embedded model on the MLX backend, loaded once per session (and
one of the test's own, `fresh_mlx_backend`), a real vLLM, llama.cpp and PostgreSQL server
(those a killed run left are reaped first), an OpenID Connect provider for the login tests,
a headless browser for the page tests, `closed_after` for what a test opens itself, where a
store test keeps its stories (`stories_at`: once in an SQLite folder, once in a PostgreSQL
database of its own), and, for the page's AppTest tests, a data folder of the test's own
(`data_dir`) and the page on the deterministic fake model (`fake`). Everything is closed
when its test (or module, or session) ends: the run must stay within the memory
`tests.memory` watches."""

from __future__ import annotations

from contextlib import ExitStack, closing
from pathlib import Path

import pytest
import streamlit as st

import backends
from backends.mlx import openblas  # noqa: F401  (before any test module imports mlx)
from tests.fake_backend import StoryFake
from tests.servers import reap_stale_servers
from weave.config import load_settings

pytest_plugins = ["tests.memory"]  # VmRSS per test, the peak in the summary


def pytest_sessionstart(session):
    """Servers left by a run killed from outside go before this run starts its own."""
    reap_stale_servers()


@pytest.fixture(scope="session")
def settings():
    return load_settings()


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for a module's page tests (Playwright imported only then)."""
    from playwright.sync_api import sync_playwright

    from scripts.screenshot import launch_browser

    with sync_playwright() as p:
        chromium = launch_browser(p)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def embedded_model_path(settings):
    from backends.embedded import ensure_embedded_model

    return ensure_embedded_model(settings.cache_dir)


@pytest.fixture(scope="session")
def mlx_backend(embedded_model_path):
    """One shared backend, as the page shares it between sessions."""
    from backends.mlx.backend import MLXBackend

    with closing(MLXBackend(embedded_model_path, display_name="SmolLM2-135M-Instruct")) as b:
        yield b


@pytest.fixture
def fresh_mlx_backend(embedded_model_path):
    """A backend with an empty fragment tree (the model weights load in well under a second),
    closed when the test ends: each holds the model's ~500 MB of float32 weights."""
    from backends.mlx.backend import MLXBackend

    with closing(MLXBackend(embedded_model_path, display_name="SmolLM2-135M-Instruct")) as b:
        yield b


@pytest.fixture
def closed_after():
    """`closed_after(thing)` is `thing` (a backend, a client: anything with `close()`),
    closed when the test ends, the last made first, however the test ends."""
    with ExitStack() as stack:
        yield lambda thing: stack.enter_context(closing(thing))


@pytest.fixture(scope="session")
def vllm_url(embedded_model_path, tmp_path_factory):
    """A real vLLM server on the embedded model (float32), shared by the session's tests."""
    from tests.vllm_server import vllm_server

    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with vllm_server(embedded_model_path, log) as url:
        yield url


@pytest.fixture(scope="session")
def llama_url(tmp_path_factory):
    """A real llama-server on the embedded GGUF, shared by the session's tests."""
    from tests.llama_server import llama_server

    with llama_server(tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield url


@pytest.fixture(scope="session")
def provider():
    """A real OpenID Connect provider on loopback; its login form takes any subject,
    whose e-mail claim is the subject itself."""
    oidc = pytest.importorskip("oidc_provider_mock")
    with oidc.run_server_in_thread() as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server on a loopback port, shared by the session's tests."""
    from tests.postgres_server import postgres_server

    with postgres_server() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def stories_at(request, tmp_path) -> Path | str:
    """Where a store test keeps its stories, in each database the store runs on: a folder
    (its SQLite file), then a new database on the session's PostgreSQL server (its URL)."""
    if request.param == "sqlite":
        yield tmp_path
        return
    from tests.postgres_server import database

    with database(request.getfixturevalue("postgres")) as url:
        yield url


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LLOOM_DATA_DIR", str(tmp_path))
    st.cache_resource.clear()  # settings and backend are per process: start afresh
    yield tmp_path
    st.cache_resource.clear()


@pytest.fixture
def fake(data_dir, monkeypatch) -> StoryFake:
    backend = StoryFake(seed=1)
    monkeypatch.setattr(backends, "create_backend", lambda settings: backend)
    return backend
