"""The desk's wrong turns of a writer's evening (issue 41) in real headless Chromium on the
real page and the embedded model: what only a browser shows (a status line left behind, a
row broken mid-word, a graph off its column)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from scripts.screenshot import app_page, wait_for_suggestions, wait_idle

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here"),
]
ROOT = Path(__file__).resolve().parent.parent
LONG = (ROOT / "bench" / "long_story.txt").read_text() * 2  # ~11,000 characters
STALE = """() => {  // whether a reading line ever stood beside a search's line or its rows
  window.lloomStale = false;
  const check = () => {
    const lines = [...document.querySelectorAll("[data-testid='stCaptionContainer']")]
      .map(caption => caption.innerText);
    const reading = lines.some(line => line.includes("Reading the story"));
    const searched = lines.some(line => line.includes("Weaving") || line.startsWith("✔️"));
    const rows = [...document.querySelectorAll("button")].some(b => b.innerText.includes("Take"));
    if (reading && (searched || rows)) window.lloomStale = true;
  };
  new MutationObserver(check).observe(document.body, {subtree: true, childList: true,
                                                      characterData: true});
}"""


def test_the_reading_line_goes_as_the_search_it_announced_begins(tmp_path):
    """Item 5: once the story is read, its "⏳ Reading the story…" line is gone before the
    search's own line (and its suggestions) come, never beside them."""
    config = tmp_path / "config.toml"  # a read of several chunks, none kept on disk
    config.write_text("[mlx]\nprefill_chunk = 128\nread_window = 640\nkv_disk_mb = 0\n")
    env = {"LLOOM_CONFIG": str(config), "LLOOM_LOOKAHEAD": "0"}
    with app_page(tmp_path / "data", env=env, timeout_ms=300_000) as page:
        page.get_by_text("✍️ Write my own", exact=True).click()
        page.get_by_label("Your story").fill(LONG)
        page.evaluate(STALE)
        page.get_by_role("button", name="Start").click()
        page.get_by_text(re.compile(r"Reading the story… [\d,]+ of [\d,]+ tokens")).wait_for()
        wait_for_suggestions(page, timeout_ms=300_000)
        wait_idle(page)
        assert page.evaluate("window.lloomStale") is False
