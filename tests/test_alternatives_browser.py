"""Alternatives by clicking a word of the story's end (issue 34, item 6) in real headless
Chromium at 1280×800 on the real embedded model: 🔍 Alternatives shows the story's last
tokens, the last one picked; the arrow keys and Enter pick another (Tab then reaches its
alternatives); a click on a word picks it and shows the model's alternatives there as
buttons, and a click on one branches the loom with it, in the same page (nothing reloads)."""

from __future__ import annotations

import shutil

import pytest

from page.alternatives import ALTERNATIVES_K
from scripts.screenshot import (
    app_page,
    button,
    start_first_story,
    story_text,
    wait_idle,
)
from weave.loom.store import LoomStore
from weave.view.present import typed_text

pytest.importorskip("playwright.sync_api")
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here")
TOKENS = "[role='dialog'] [data-lloom-at]"
PICKED = f"{TOKENS}[tabindex='0']"


def picked(page) -> str:
    """The position of the token the dialog shows picked, once it is drawn."""
    page.locator(PICKED).wait_for()
    return page.locator(PICKED).get_attribute("data-lloom-at")


def wait_picked(page, position: str) -> None:
    page.locator(f"{TOKENS}[data-lloom-at='{position}'][tabindex='0']").wait_for()
    wait_idle(page)


@pytest.mark.slow
@needs_chromium
def test_a_click_on_a_word_then_on_an_alternative_branches_there(tmp_path):
    with app_page(tmp_path, env={"LLOOM_LOOKAHEAD": "0"}) as page:
        start_first_story(page)
        wait_idle(page)
        before = story_text(page)
        page.evaluate("window.lloomSamePage = true")  # gone if the page loads again
        button(page, "🔍 Alternatives").click()
        tokens = page.locator(TOKENS)
        assert picked(page) == tokens.last.get_attribute("data-lloom-at")  # the last
        page.locator(PICKED).focus()  # Tab reaches it; ← the one before, Enter picks
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("Enter")
        before_last = tokens.nth(tokens.count() - 2).get_attribute("data-lloom-at")
        wait_picked(page, before_last)
        focused = "document.activeElement.getAttribute('data-lloom-at')"
        page.wait_for_function(f"{focused} === '{before_last}'")  # still on it
        page.keyboard.press("Tab")  # on to its first alternative (not the story's own)
        first = page.locator(f"[class*='st-key-alt_{before_last}_'] button:enabled").first
        assert first.evaluate("button => button === document.activeElement")
        word = tokens.filter(has_text="upon")
        assert word.count() == 1 and word.inner_text().strip() == "upon"
        word.click()  # a click on the word of the story picks it
        at = word.get_attribute("data-lloom-at")
        wait_picked(page, at)
        offered = [page.locator(f"[role='dialog'] .st-key-alt_{at}_{i} button").first
                   for i in range(ALTERNATIVES_K)]  # fmt: skip
        labels = [button.inner_text() for button in offered]
        assert all(button.is_visible() for button in offered)  # on the first screen
        assert "upon" in page.locator("[role='dialog']").inner_text()  # what was there
        pick = next(i for i, label in enumerate(labels) if "upon" not in label)
        choice = typed_text(labels[pick].rsplit(" ", 1)[0].replace("∅", ""))
        offered[pick].click()  # branches: the dialog closes, the story moves
        page.locator("[role='dialog']").wait_for(state="detached")
        wait_idle(page)
        assert story_text(page).startswith(before[: before.index(" upon")] + choice)
        assert page.evaluate("window.lloomSamePage === true")  # no reload
    [sid] = [info.id for info in LoomStore(tmp_path).stories()]
    loom = LoomStore(tmp_path).load(sid)
    [branched] = [n for n in loom.nodes.values()
                  if n.provenance is not None and n.provenance.how == "alternative"]  # fmt: skip
    assert branched.text.endswith(choice)
    assert loom.text(loom.cursor).startswith(loom.text(branched.id))  # the story is there
