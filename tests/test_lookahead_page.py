"""Look-ahead on the page (AppTest), on the real embedded model shared by two sessions:
each gets the suggestions one session alone gets, and accepting the top suggestion
shows the next ones from look-ahead, asking the model nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st

from tests.test_page import accept, backend_error, offer, started, suggestions, workspace
from weave.config import DEFAULT_CONFIG

STEPS = 2  # accepts of the top suggestion after the first search


@pytest.fixture
def small_search(tmp_path, monkeypatch) -> Path:
    """The repository's settings, with searches small enough for a loaded CPU."""
    text = DEFAULT_CONFIG.read_text()
    text = text.replace("max_depth = 12", "max_depth = 6").replace(
        "max_suggestions = 25", "max_suggestions = 8"
    )
    path = tmp_path / "config.toml"
    path.write_text(text)
    monkeypatch.setenv("LLOOM_CONFIG", str(path))
    monkeypatch.setenv("LLOOM_DATA_DIR", str(tmp_path / "data"))
    st.cache_resource.clear()  # settings and backend are per process: start afresh
    yield path
    st.cache_resource.clear()


def walk(at) -> list[list[str]]:
    """The suggestions shown after starting, then after each accept of the top one."""
    shown = [suggestions(at)]
    for _ in range(STEPS):
        accept(at, 0)
        assert not at.exception and not backend_error(at)
        shown.append(suggestions(at))
    return shown


@pytest.mark.slow
def test_two_sessions_with_look_ahead_get_the_suggestions_one_gets_alone(small_search, monkeypatch):
    monkeypatch.setenv("LLOOM_LOOKAHEAD", "0")
    alone = walk(started())
    assert all(alone)
    st.cache_resource.clear()  # a fresh backend, with look-ahead on
    monkeypatch.setenv("LLOOM_LOOKAHEAD", "3")
    a = started()
    b = started()  # its search runs while a's look-ahead does
    shown = {"a": [suggestions(a)], "b": [suggestions(b)]}
    for _ in range(STEPS):
        for name, at in (("a", a), ("b", b)):
            workspace(at).ahead.join(timeout=600)  # the writer has read long enough
            accept(at, 0)
            assert not at.exception and not backend_error(at)
            assert workspace(at).offers.from_ahead(offer(at)), "not from look-ahead"
            shown[name].append(suggestions(at))
    assert shown["a"] == alone
    assert shown["b"] == alone
