"""A long story is read in the background (issue 34, item 1: "the writer can keep editing
and moving while it reads"), on the real embedded model: `Offers.show` answers "reading"
at once with how far it has got, the tab moves meanwhile, and once read the search needs
no prefill; a move stops the reading and reading again goes on from what was read. In
Chromium the page ends its run while the model reads, the progress moves by itself, and
what the writer types meanwhile stays. llama-server reads a long story apart too, its
progress streamed."""

from __future__ import annotations

import re
import shutil
import time
from contextlib import closing
from pathlib import Path

import pytest

from backends.base import Cancelled
from backends.llamacpp import LlamaCppBackend
from backends.mlx.backend import MLXBackend
from scripts.screenshot import (
    ACCEPT,
    STORY,
    app_page,
    button,
    story_text,
    wait_for_suggestions,
    wait_idle,
)
from tests.background import ended
from tests.llama_server import llama_server
from weave.desk.session import Workspace
from weave.desk.spot import Offer
from weave.loom.store import LoomStore
from weave.search.beams import expand
from weave.search.params import SearchParams

pytest.importorskip("playwright.sync_api")
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here")
ROOT = Path(__file__).resolve().parent.parent
LONG = (ROOT / "bench" / "long_story.txt").read_text() * 2  # ~11,000 characters
PARAMS = SearchParams(cutoff=0.1, max_depth=4, max_suggestions=8)
CHUNK = 256


def alive() -> bool:
    return True


@pytest.fixture
def whole_window(embedded_model_path):
    """A backend that reads the whole story (no CPU window), in small chunks: a long read."""
    backend = MLXBackend(embedded_model_path, read_window=0, prefill_chunk=CHUNK)
    yield backend
    backend.close()


def opened(tmp_path, text: str) -> Workspace:
    ws = Workspace(LoomStore(tmp_path))
    assert ws.start(text)
    return ws


def read_at_least(ws: Workspace, tokens: int, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while (state := ws.offers.reading.state()) is None or state.read < tokens:
        assert ws.offers.reading.running() and time.monotonic() < deadline
        time.sleep(0.02)
    return state.read


def test_a_long_story_is_read_apart_and_searched_once_read(tmp_path, whole_window):
    ws = opened(tmp_path, LONG)
    began = time.monotonic()
    shown = ws.offers.show(whole_window, ws.spot, PARAMS, alive=alive)
    assert time.monotonic() - began < 5  # it answers, the model reads on
    assert shown.source == "reading" and shown.offer is None and shown.error is None
    total = shown.reading.total
    assert total > 2000 and shown.reading.read < total
    assert ws.offers.reading.running()
    read_at_least(ws, 2 * CHUNK)
    ended(ws.offers.reading)
    assert ws.offers.reading.state().read == total
    searched = ws.offers.show(whole_window, ws.spot, PARAMS, alive=alive)
    assert searched.source == "searched" and searched.offer.result.suggestions
    assert searched.offer.result.stats.prefill_tokens == 0  # read already, every token


def test_a_move_stops_the_reading_and_reading_again_goes_on_from_what_was_read(
    tmp_path, whole_window
):
    ws = opened(tmp_path, LONG)
    assert ws.offers.show(whole_window, ws.spot, PARAMS, alive=alive).source == "reading"
    read = read_at_least(ws, 3 * CHUNK)
    ws.edit(LONG + " And then the owl spoke.")  # a move: the reading stops at its next chunk
    assert ws.offers.reading.state() is None
    ended(ws.offers.reading, timeout=60)
    again = ws.offers.show(whole_window, ws.spot, PARAMS, alive=alive)
    assert again.source == "reading" and again.reading.read >= read  # the cache kept it
    assert again.reading.total > again.reading.read
    ended(ws.offers.reading)
    assert ws.offers.show(whole_window, ws.spot, PARAMS, alive=alive).source == "searched"


def test_opening_another_story_stops_the_reading(tmp_path, whole_window):
    ws = opened(tmp_path, LONG)
    assert ws.offers.show(whole_window, ws.spot, PARAMS, alive=alive).source == "reading"
    read_at_least(ws, CHUNK)
    reading = ws.offers.reading
    assert ws.start("The fox ran home.")
    ended(reading, timeout=60)
    assert reading.state() is None


def test_while_the_story_is_read_the_door_says_how_far_and_refuses_look_ahead(
    tmp_path, whole_window
):
    ws = opened(tmp_path, "The fox ran home.")
    result = ws.offers.show(whole_window, ws.spot, PARAMS, alive=alive).offer.result
    ws.edit("The fox ran home. " + LONG)
    assert ws.offers.show(whole_window, ws.spot, PARAMS, alive=alive).source == "reading"
    state = ws.offers.reading_state()
    assert state is not None and state.read < state.total
    offer = Offer(ws.cursor, PARAMS, result)  # suggestions to look ahead from, here
    assert not ws.offers.look_ahead(whole_window, ws.spot, offer, rows=3, alive=alive)
    assert not ws.ahead.running()  # the story's own search comes first
    ended(ws.offers.reading)
    assert ws.offers.reading_state() is None


def test_a_short_story_is_searched_at_once(tmp_path, whole_window):
    ws = opened(tmp_path, "The fox ran home.")
    shown = ws.offers.show(whole_window, ws.spot, PARAMS, alive=alive)
    assert shown.source == "searched" and not ws.offers.reading.running()


@pytest.mark.slow
@needs_chromium
def test_the_page_goes_on_while_a_long_story_is_read(tmp_path):
    config = tmp_path / "config.toml"  # the whole story read, a chunk at a time, no disk
    config.write_text(f"[mlx]\nprefill_chunk = {CHUNK}\nread_window = 0\nkv_disk_mb = 0\n")
    env = {"LLOOM_CONFIG": str(config), "LLOOM_LOOKAHEAD": "0"}
    with app_page(tmp_path / "data", env=env, timeout_ms=300_000) as page:
        page.get_by_text("✍️ Write my own", exact=True).click()
        page.get_by_label("Your story").fill(LONG)
        page.get_by_role("button", name="Start").click()
        reading = page.get_by_text(re.compile(r"Reading the story… [\d,]+ of [\d,]+ tokens"))
        reading.wait_for()
        wait_idle(page)  # the script has ended: the page is the writer's
        first = reading.inner_text()
        assert reading.is_visible() and not button(page, ACCEPT).count()
        assert page.get_by_text("The story is being read: its search comes next.").is_visible()
        page.evaluate("window.sameSession = true")
        box = page.locator(STORY)
        box.click()
        box.press("Control+End")
        page.keyboard.type(" And the owl")  # typed while the model reads
        page.wait_for_function(  # the progress moves by itself
            "first => [...document.querySelectorAll('[data-testid=stCaptionContainer]')]"
            ".some(c => c.innerText.includes('Reading the story') && c.innerText !== first)",
            arg=first,
        )
        wait_for_suggestions(page, timeout_ms=300_000)
        assert story_text(page).endswith(" And the owl")  # nothing typed was lost
        assert page.evaluate("window.sameSession === true")  # no reload
        assert not reading.count()


@pytest.mark.slow
def test_a_llama_server_reads_a_long_story_apart_with_its_progress(tmp_path):
    """llama-server reads in batches of -ub tokens, and streams each batch's end
    (`return_progress`); the search that follows finds the story in its slot. A read no
    longer wanted stops at the next batch."""
    flags = ("-c", "8192", "-b", str(CHUNK), "-ub", str(CHUNK))
    with (
        llama_server(tmp_path / "llama.log", slots=1, flags=flags) as url,
        closing(LlamaCppBackend(url)) as backend,
    ):
        ids = backend.tokenize(LONG)[:1500]
        assert backend.unread(ids) >= 1500
        reports = []
        backend.read_ahead(ids, 5, lambda read, total: reports.append((read, total)))
        assert len(reports) >= 1500 // CHUNK and reports[-1] == (reports[-1][1],) * 2
        assert [read for read, _ in reports] == sorted(read for read, _ in reports)
        assert backend.unread(ids) == 0
        result = expand(backend, ids, PARAMS)
        # read already: the server evaluates again only a cached prompt's last token a request
        assert result.suggestions and result.stats.prefill_tokens <= result.stats.forward_calls
        other, reports = backend.tokenize(LONG[::-1])[:1500], []
        with backend.cancellable(lambda: not reports), pytest.raises(Cancelled):
            backend.read_ahead(other, 5, lambda read, total: reports.append(read))
        assert len(reports) == 1
