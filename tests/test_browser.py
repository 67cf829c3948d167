"""The real page in real headless Chromium, on the real embedded model.

One server (`streamlit run lloom.py` on a free loopback port, a throwaway data folder)
serves the module's tests; it is stopped at the end.
"""

from __future__ import annotations

import shutil

import pytest

from scripts.screenshot import launch_browser, running_app, start_first_story

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here"),
]
FIRST = "Once upon a time,"
STORY = "textarea[aria-label='Story']"
SUGGESTION = "input[aria-label='Suggestion']"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("data")) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        chromium = launch_browser(p)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(server)
    yield page
    context.close()


def wait_idle(page) -> None:
    """Until the page's script has finished its run (and any run it asked for)."""
    page.wait_for_timeout(300)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for()


def story_text(page) -> str:
    return page.locator(STORY).input_value()


def test_accepting_a_suggestion_grows_the_story_by_exactly_its_text(page):
    page.get_by_text(FIRST, exact=True).click()  # pick it among the starting stories
    start_first_story(page)
    assert story_text(page) == FIRST
    shown = page.locator(SUGGESTION).first.input_value()
    assert shown.strip()
    page.get_by_role("button", name="➡️").first.click()
    page.wait_for_function(
        "([selector, before]) => document.querySelector(selector).value !== before",
        arg=[STORY, FIRST],
    )
    grown = story_text(page)
    # prefix space: the box shows the text without its leading space; accepting restores it
    assert grown in (FIRST + " " + shown, FIRST + shown), grown


def test_the_graph_downloads_as_dot(page, tmp_path):
    start_first_story(page)
    first = page.locator(SUGGESTION).first.input_value()
    with page.expect_download() as download:
        page.get_by_role("button", name="DOT", exact=True).click()
    path = tmp_path / "graph.dot"
    download.value.save_as(path)
    dot = path.read_text(encoding="utf-8")
    assert dot.startswith("digraph lloom {")
    assert "rankdir=LR" in dot
    assert first.split()[0] in dot  # the best suggestion's first word labels a node


def test_a_refreshed_tab_comes_back_to_the_same_story(page):
    start_first_story(page)
    page.get_by_role("button", name="➡️").first.click()
    page.wait_for_function(
        "([selector, before]) => document.querySelector(selector).value !== before",
        arg=[STORY, FIRST],
    )
    wait_idle(page)  # the next search ran (a lone suggestion may have been accepted too)
    grown = story_text(page)
    page.wait_for_url("**/?story=*")
    url = page.url
    page.reload()
    page.locator(STORY).wait_for()
    assert page.url == url
    assert story_text(page) == grown
