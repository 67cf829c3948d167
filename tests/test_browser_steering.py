"""Memory & notes in real headless Chromium, on the real embedded model: set the memory,
the page searches under it and shows it in What the model sees; reload, still there."""

from __future__ import annotations

import shutil

import pytest

from scripts.screenshot import (
    launch_browser,
    running_app,
    start_first_story,
    wait_for_suggestions,
    wait_idle,
)

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here"),
]
MEMORY = "A fable about a clever fox."
PANEL = "📝 Memory & notes"
SEEN = "👁️ What the model sees"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("data")) as url, playwright.sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        page.goto(url)
        yield page
        browser.close()


def open_popover(page, name: str) -> None:
    page.get_by_role("button", name=name).click()
    page.wait_for_timeout(300)


def test_memory_is_searched_under_shown_and_kept_across_a_reload(page):
    start_first_story(page)
    open_popover(page, PANEL)
    memory = page.get_by_role("textbox", name="Memory")
    memory.fill(MEMORY)
    memory.press("Control+Enter")  # a text area's value is sent on Ctrl+Enter or blur
    page.keyboard.press("Escape")  # close the popover
    open_popover(page, SEEN)
    seen = page.locator("[data-testid='stCode']", has_text=MEMORY)  # once the rerun is done
    assert seen.inner_text().startswith(f"[memory · 9 tokens]\n{MEMORY}\n[story · ")
    wait_idle(page)
    page.keyboard.press("Escape")
    page.reload()
    wait_for_suggestions(page)
    open_popover(page, PANEL)
    assert page.get_by_role("textbox", name="Memory").input_value() == MEMORY
