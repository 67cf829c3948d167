"""The writer's desk (issue 24): what fits on a laptop's screen, and the keyboard.

The wiring runs through Streamlit's AppTest on the fake model: each move's button carries
its key from `weave.keys`, the n-th suggestion's buttons theirs, and every button has
words. The rest runs in real headless Chromium on the real embedded model at 1280×800:
after Start at least five suggestions and the story's end are in view, with one accept
button per suggestion; `1` takes the top suggestion and Undo's key brings the story back;
keys typed into the story box stay text; a suggestion edited in its row is taken by Enter;
a click in the story tree moves there without loading the page again, its tab kept.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import backends
from bench.page_probe import FULLY_IN_VIEW, LAST_LINE_IN_VIEW, STATUS
from page.suggestions import LISTED
from scripts.screenshot import (
    ACCEPT,
    STORY,
    STORY_TREE,
    launch_browser,
    running_app,
    show_story_tree,
    start_first_story,
    story_text,
    wait_idle,
)
from tests.fake_backend import FakeBackend
from weave import keys

PAGE = str(Path(__file__).resolve().parent.parent / "lloom.py")
FIRST = "Once upon a time,"
MOVE_BUTTONS = {  # weave.keys.MOVES' name -> the page's button key
    "again": "again",
    "undo": "undo",
    "redo": "redo",
    "previous": "sibling_prev",
    "next": "sibling_next",
    "bookmark": "bookmark",
    "sample": "sample",
}


# -- the wiring (AppTest, fake model) ---------------------------------------------------------
class StoryFake(FakeBackend):
    """The fake model, reading any story (characters it has no token for read as 'x')."""

    def tokenize(self, text: str) -> list[int]:
        return super().tokenize("".join(c if c in "abc., xé" else "x" for c in text))


@pytest.fixture
def desk(tmp_path, monkeypatch) -> AppTest:
    """The story page after Start, on a fake model that offers many suggestions."""
    monkeypatch.setenv("LLOOM_DATA_DIR", str(tmp_path))
    st.cache_resource.clear()
    backend = StoryFake(seed=1)
    monkeypatch.setattr(backends, "create_backend", lambda settings: backend)
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    at.button(key="start").click().run()
    assert not at.exception
    yield at
    st.cache_resource.clear()


def shortcut(at: AppTest, key: str) -> str:
    return at.button(key=key).proto.shortcut


def test_every_move_carries_its_key(desk):
    for name, button in MOVE_BUTTONS.items():
        assert shortcut(desk, button) == keys.MOVES[name].shortcut.lower(), name


def test_the_nth_suggestion_is_taken_by_n_and_kept_by_shift_n(desk):
    rows = [b.key[: -len("_go")] for b in desk.button if b.key and b.key.endswith("_go")
            and b.key.startswith("sg_")]  # fmt: skip
    assert len(rows) > keys.NUMBERED  # the fake offers more than nine
    for rank, row in enumerate(rows):
        taken, kept = keys.accept_key(rank), keys.keep_key(rank)
        assert shortcut(desk, f"{row}_go") == (taken or "")
        assert shortcut(desk, f"{row}_keep") == (kept.lower() if kept else "")


def test_one_line_lists_every_key(desk):
    line = " ".join(c.value for c in desk.caption)
    assert keys.key_line() in line
    for key in keys.MOVES.values():
        assert f"{key.shortcut} {key.does}" in line


def test_every_button_has_words(desk):
    for button in [*desk.button, *desk.sidebar.button]:
        assert re.search(r"\w\w", button.label) or button.help, button.key


def test_no_key_is_a_chord_that_fires_while_typing():
    """Streamlit fires Ctrl/Alt/Cmd chords inside text boxes: the desk uses none."""
    every = [k.shortcut for k in [*keys.MOVES.values(), keys.WORD]]
    every += [keys.accept_key(r) for r in range(keys.NUMBERED)]
    every += [keys.keep_key(r) for r in range(keys.NUMBERED)]
    assert len(set(every)) == len(every)
    for shortcut_ in every:
        assert not re.search(r"(?i)ctrl|alt|cmd|meta|mod|option", shortcut_), shortcut_
        assert shortcut_.lower()[-1] not in "cr"  # Streamlit's own


# -- the desk in Chromium at 1280×800 (real model) ------------------------------------------
playwright = pytest.importorskip("playwright.sync_api")
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here")


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
def laptop(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(server)
    start_first_story(page)
    wait_idle(page)
    yield page
    context.close()


def accept_buttons(page, *, include_hidden: bool = False):
    return page.get_by_role("button", name=re.compile(ACCEPT), include_hidden=include_hidden)


def shown_suggestions(page) -> int:
    return int(STATUS.search(page.get_by_text(STATUS).first.inner_text()).group(1))


@pytest.mark.slow
@needs_chromium
def test_five_suggestions_and_the_story_end_in_view_at_1280_by_800(laptop):
    assert accept_buttons(laptop).evaluate_all(FULLY_IN_VIEW) >= 5
    assert laptop.locator(STORY).evaluate(LAST_LINE_IN_VIEW)
    listed = accept_buttons(laptop, include_hidden=True).count()  # one each, none hidden
    assert listed == min(shown_suggestions(laptop), LISTED)
    more = laptop.get_by_role("button", name=re.compile(r"▾ \d+ more"))
    if listed < shown_suggestions(laptop):  # the rest one click away
        assert more.inner_text().startswith(f"▾ {shown_suggestions(laptop) - listed} more")
    else:
        assert more.count() == 0


def take_the_top_by_its_key(page) -> None:
    """Press 1 with no box focused (a click in the margin), until the story has grown."""
    page.mouse.click(5, 400)
    page.keyboard.press("1")
    page.wait_for_function(
        "([selector, before]) => document.querySelector(selector).value !== before",
        arg=[STORY, FIRST],
    )


@pytest.mark.slow
@needs_chromium
def test_1_takes_the_top_suggestion_and_undos_key_brings_it_back(laptop):
    take_the_top_by_its_key(laptop)
    assert story_text(laptop).startswith(FIRST) and len(story_text(laptop)) > len(FIRST)
    wait_idle(laptop)
    laptop.keyboard.press(keys.MOVES["undo"].shortcut.lower())
    laptop.wait_for_function(
        "([selector, before]) => document.querySelector(selector).value === before",
        arg=[STORY, FIRST],
    )


@pytest.mark.slow
@needs_chromium
def test_keys_typed_in_the_story_box_stay_text(laptop):
    url = laptop.url
    box = laptop.locator(STORY)
    box.click()
    box.press("End")
    laptop.keyboard.type(" 1z")
    laptop.wait_for_timeout(1500)  # long enough for a click's rerun to begin
    assert box.input_value() == FIRST + " 1z"
    assert laptop.url == url  # no move: the node in the URL is the same


@pytest.mark.slow
@needs_chromium
def test_a_long_storys_last_line_is_in_view(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(server)
        page.get_by_text("✍️ Write my own", exact=True).click()
        ending = "And at the very end the fox ran home."
        page.get_by_label("Your story").fill("The fox ran on and on. " * 60 + ending)
        start_first_story(page)
        wait_idle(page)
        assert story_text(page).endswith(ending)
        assert page.locator(STORY).evaluate(LAST_LINE_IN_VIEW)  # scrolled to its end
    finally:
        context.close()


@pytest.mark.slow
@needs_chromium
def test_a_suggestion_edited_in_its_row_is_taken_by_enter(laptop):
    laptop.get_by_role("button", name="✏️ Edit").nth(1).click()
    box = laptop.locator("[data-testid='stForm'] input")
    box.wait_for()
    assert box.evaluate("el => el.getBoundingClientRect().bottom <= innerHeight")  # in view
    box.fill("the fox ran home")
    box.press("Enter")
    laptop.wait_for_function(
        "([selector, before]) => document.querySelector(selector).value !== before",
        arg=[STORY, FIRST],
    )
    assert story_text(laptop).removeprefix(FIRST).lstrip().startswith("the fox ran home")


@pytest.mark.slow
@needs_chromium
def test_a_click_in_the_story_tree_moves_there_in_the_same_page(laptop):
    take_the_top_by_its_key(laptop)
    wait_idle(laptop)
    show_story_tree(laptop)
    laptop.evaluate("window.lloomSamePage = true")  # a reload would forget it
    start = laptop.locator(".lloom-graph svg g.node").filter(has_text="(start)")
    start.locator("a").first.click()
    laptop.wait_for_function("s => document.querySelector(s).value === ''", arg=STORY)
    wait_idle(laptop)
    assert laptop.evaluate("window.lloomSamePage === true")
    tab = laptop.get_by_role("tab", name=STORY_TREE)
    assert tab.get_attribute("aria-selected") == "true"  # the tab stays where it was
    assert laptop.locator(".lloom-graph svg").count() == 1  # the tree drawn again, there
