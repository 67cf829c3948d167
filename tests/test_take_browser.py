"""Taking on the page in real headless Chromium at 1280×800 on the real embedded model.
Typing then ➜ Take (issue 34, item 2): text typed at the story's end and a click on ➜ Take
without Ctrl+Enter applies the edit, takes nothing, and says so in one line; never a silent
📌 Keep. Part of a row (issue 39, item 5): hovering a word marks the words a click takes
and fades the rest; a click takes the row up to that word in the same page (nothing
reloads), the rest of the row comes first, W takes its first word, and the keyboard
reaches a row's words (Tab, the arrows) and takes it up to one (Enter)."""

from __future__ import annotations

import shutil

import pytest

from scripts.screenshot import (
    ACCEPT,
    STORY,
    app_page,
    button,
    start_first_story,
    story_text,
    wait_for_suggestions,
    wait_idle,
)
from weave.desk.take import NOT_TAKEN
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


def words_of(text: str) -> str:
    """A row's text as words: its faint marks and runs of whitespace as one space."""
    return " ".join(text.replace("·", " ").replace("↵", " ").split())


def style(locator, name: str) -> str:
    return locator.evaluate(f"element => getComputedStyle(element).{name}")


def grown(page, before: str) -> str:
    """The story once it is no longer `before`."""
    page.wait_for_function(
        "([selector, before]) => document.querySelector(selector).value !== before",
        arg=[STORY, before],
    )
    wait_idle(page)
    return story_text(page)


@pytest.mark.slow
@needs_chromium
def test_a_click_on_a_word_takes_the_row_up_to_it_in_the_same_page(tmp_path):
    with app_page(tmp_path, env={"LLOOM_LOOKAHEAD": "0"}) as page:
        start_first_story(page)
        wait_idle(page)
        before = story_text(page)
        page.evaluate("window.lloomSamePage = true")  # gone if the page loads again
        row = page.locator(".st-key-suggestions .take:has(.w:nth-child(3))").first
        words = row.locator(".w")
        words.nth(1).hover()  # what a click would take: up to this word, the rest faded
        assert [style(words.nth(i), "textDecorationLine") for i in (0, 1)] == ["underline"] * 2
        assert style(words.nth(2), "textDecorationLine") == "none"
        assert float(style(words.nth(2), "opacity")) < 1
        assert float(style(words.nth(1), "opacity")) == 1
        shown = words.nth(0).text_content() + words.nth(1).text_content()
        end = int(words.nth(1).get_attribute("data-lloom-at").rsplit("@", 1)[1])
        rest = "".join(words.all_text_contents()[2:])
        words.nth(1).click()
        story = grown(page, before)
        added = story[len(before) :]
        assert story.startswith(before) and len(added) == end  # the row's text up to there
        assert added.lstrip() == shown.replace("·", " ").lstrip()
        assert page.evaluate("window.lloomSamePage === true")  # no reload
        wait_for_suggestions(page)
        rows = [words_of(text) for text in page.locator(".st-key-suggestions .take").evaluate_all(
            "rows => rows.map(row => [...row.querySelectorAll('.w')].map(w => w.textContent)"
            ".join(''))")]  # fmt: skip
        first = page.locator(".st-key-suggestions [data-testid='stMarkdownContainer']").first
        if first.locator(".share.rest").count():  # the rest, first
            assert rows[0] == words_of(rest)
        else:  # or the node's own search holds it (the model goes on the same way)
            assert any(row.startswith(words_of(rest).rstrip(".,;:!?")) for row in rows), rows
        page.mouse.click(5, 400)  # no box focused: W takes the rest's first word
        page.keyboard.press("w")
        story, before = grown(page, story), story
        assert story.startswith(before) and len(story) > len(before)
        wait_for_suggestions(page)
        words = page.locator(".st-key-suggestions .take:has(.w:nth-child(3))").first.locator(".w")
        end = int(words.nth(1).get_attribute("data-lloom-at").rsplit("@", 1)[1])
        words.nth(0).focus()  # Tab reaches a row's first word; → the next, Enter takes up to it
        page.keyboard.press("ArrowRight")
        page.keyboard.press("Enter")
        assert len(grown(page, story)) == len(story) + end
        assert page.evaluate("window.lloomSamePage === true")
    [sid] = [info.id for info in LoomStore(tmp_path).stories()]
    loom = LoomStore(tmp_path).load(sid)
    by_keys = loom.node(loom.cursor)
    by_w = loom.node(by_keys.parent)
    by_click = loom.node(by_w.parent)
    assert [n.provenance.how for n in (by_keys, by_w, by_click)] == ["partial suggestion"] * 3
    assert by_click.text == added
