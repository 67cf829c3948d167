"""Another loom tool's file through the real page in real headless Chromium: a socketteer
loom dropped on 📥 Import opens as a story, the page says which format it was and what it
kept aside, and the story comes back out as Open Loom v2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scripts.screenshot import running_app, story_text, wait_idle
from weave.loom.store import LoomStore

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here"),
]
LOOM = {
    "root": {
        "id": "r", "text": "The lighthouse keeper", "visited": True,
        "children": [
            {"id": "a", "text": " slept.", "children": [], "tags": ["bookmark"]},
            {"id": "b", "text": " woke", "meta": {"source": "AI"},
             "children": [{"id": "c", "text": " to a ship's horn.", "children": []}]},
        ],
    },
    "chapters": {"x": {"title": "Night"}}, "selected_node_id": "c",
}  # fmt: skip


def test_a_socketteer_loom_imports_through_the_page_and_leaves_as_open_loom(tmp_path, browser):
    with running_app(tmp_path) as url:
        context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                      accept_downloads=True)  # fmt: skip
        page = context.new_page()
        page.set_default_timeout(90_000)
        page.goto(url)
        wait_idle(page)
        expand = page.get_by_test_id("stExpandSidebarButton")
        if expand.count():
            expand.click()
        page.get_by_role("button", name="📥 Import a story").click()
        page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
            files=[
                {
                    "name": "keeper.json",
                    "mimeType": "application/json",
                    "buffer": json.dumps(LOOM).encode(),
                }
            ]  # fmt: skip
        )
        page.get_by_text("Imported from socketteer loom").first.wait_for()
        wait_idle(page)
        assert "chapters" in page.get_by_text("Imported from socketteer loom").first.text_content()
        assert story_text(page) == "The lighthouse keeper woke to a ship's horn."
        (info,) = LoomStore(tmp_path).stories()
        loom = LoomStore(tmp_path).load(info.id)
        assert len(loom.nodes) == 5 and loom.bookmarks == {"a"}  # the empty root above "r"
        expand = page.get_by_test_id("stExpandSidebarButton")
        if expand.count():
            expand.click()
        with page.expect_download() as download:
            page.get_by_role("button", name="Open Loom v2").click()
        doc = json.loads(Path(download.value.path()).read_text())
        assert doc["format"] == "open-loom" and doc["trees"][0]["currentNodeId"] == "c"
        assert doc["trees"][0]["extensions"]["socketteer-loom"]["chapters"] == LOOM["chapters"]
        context.close()
