"""Finding a branch on the page (issue 34, item 5) in real headless Chromium at 1280×800,
on the real embedded model: a phrase written in another story, typed into the sidebar's
search box, is listed, and a click opens that story at the node where it ends."""

from __future__ import annotations

import re
import shutil

import pytest

from scripts.screenshot import STORY, app_page, story_text, wait_idle
from weave.loom.store import LoomStore

pytest.importorskip("playwright.sync_api")
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here")
OPENING = "The city of Nova Haven was a"


@pytest.mark.slow
@needs_chromium
def test_a_branch_written_earlier_is_found_and_opened(tmp_path):
    store = LoomStore(tmp_path)
    sid, _ = store.create(OPENING)
    steps = lambda lm: lm.accept(" place of").accept(" towering").accept(" skyscrapers.")  # noqa: E731
    loom = store.update(sid, lambda lm: steps(lm).undo().undo().accept(" quiet gardens."))
    towering = next(n.id for n in loom.nodes.values() if n.text == " towering")
    with app_page(tmp_path, timeout_ms=120_000) as page:
        wait_idle(page)
        page.locator("[data-testid='stExpandSidebarButton']").click()
        box = page.get_by_role("textbox", name="🔎 Find a branch")
        box.fill("PLACE OF TOWERING")
        box.press("Enter")
        found = page.get_by_role("button", name=re.compile("towering"))
        found.first.wait_for()
        assert found.count() == 1 and "Nova Haven" in found.inner_text()
        assert found.first.is_visible()  # in the sidebar, at 1280×800
        found.click()
        page.wait_for_url(re.compile(f"story={sid}"))
        page.locator(STORY).wait_for()
        assert story_text(page).endswith("place of towering")
        assert f"node={towering}" in page.url
