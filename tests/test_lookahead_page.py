"""Look-ahead on the page, on the real embedded model. AppTest: two sessions sharing the
model each get the suggestions one session alone gets, and accepting the top suggestion
shows the next ones from look-ahead, asking the model nothing. Chromium at 1280×800: the
⚡ marks appear while the writer types in the story box, and the typing is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import streamlit as st

from page.suggestions import MARKS_EVERY_S
from scripts.screenshot import STORY, launch_browser, running_app, start_first_story, story_text
from tests.background import ended
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
            ended(workspace(at).ahead, timeout=600)  # the writer has read long enough
            accept(at, 0)
            assert not at.exception and not backend_error(at)
            assert workspace(at).offers.from_ahead(offer(at)), "not from look-ahead"
            shown[name].append(suggestions(at))
    assert shown["a"] == alone
    assert shown["b"] == alone


# -- ⚡ while the writer types (Chromium, 1280×800, the real embedded model) -------------------
playwright = pytest.importorskip("playwright.sync_api")
MARKED = """() => [...document.querySelectorAll('.share')].some(
    share => getComputedStyle(share, '::before').content.includes('⚡'))"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here")
def test_marks_appear_while_the_writer_types_and_the_typing_stays(small_search, tmp_path):
    """Look-ahead finishes while the writer types in the story box (no click, no Ctrl+Enter:
    no rerun of the page): the ⚡ marks come by themselves, and every typed key is kept."""
    typed = " and then the fox"
    env = {"LLOOM_CONFIG": str(small_search), "LLOOM_LOOKAHEAD": "2"}
    with running_app(tmp_path / "page", env=env) as url, playwright.sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(300_000)
        page.goto(url)
        start_first_story(page)
        before = story_text(page)
        box = page.locator(STORY)
        box.click()
        box.press("End")
        page.keyboard.type(typed[:8], delay=100)  # while look-ahead searches
        page.wait_for_function(MARKED, polling=500)
        page.keyboard.type(typed[8:], delay=100)  # while the marks are redrawn
        page.wait_for_timeout(2 * MARKS_EVERY_S * 1000)  # a redraw or two more
        assert box.input_value() == before + typed
        assert page.evaluate(MARKED)
        browser.close()
