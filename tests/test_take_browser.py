"""Typing then ➜ Take (issue 34, item 2) in real headless Chromium at 1280×800 on the real
embedded model: text typed at the story's end and a click on ➜ Take without Ctrl+Enter
applies the edit, takes nothing, and says so in one line; never a silent 📌 Keep."""

from __future__ import annotations

import shutil

import pytest

from lloom_take import NOT_TAKEN
from scripts.screenshot import (
    ACCEPT,
    STORY,
    app_page,
    button,
    start_first_story,
    story_text,
    wait_idle,
)
from weave.loom.store import LoomStore

pytest.importorskip("playwright.sync_api")
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here")


@pytest.mark.slow
@needs_chromium
def test_typing_then_take_applies_the_edit_and_says_what_happened(tmp_path):
    with app_page(tmp_path, env={"LLOOM_LOOKAHEAD": "0"}) as page:
        start_first_story(page)
        wait_idle(page)
        before = story_text(page)
        box = page.locator(STORY)
        box.click()
        box.press("End")
        page.keyboard.type(" and then the owl")
        button(page, ACCEPT).first.click()  # no Ctrl+Enter: the click blurs the box
        page.get_by_text(NOT_TAKEN).wait_for()
        wait_idle(page)
        assert story_text(page) == before + " and then the owl"
    [sid] = [info.id for info in LoomStore(tmp_path).stories()]
    kinds = [n.kind for n in LoomStore(tmp_path).load(sid).nodes.values()]
    assert "accepted" not in kinds and "edited" in kinds  # the edit, and no kept suggestion
