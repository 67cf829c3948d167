"""The real page in real headless Chromium, on the real embedded model.

One server (`streamlit run lloom.py` on a free loopback port, a throwaway data folder)
serves the module's tests; it is stopped at the end.
"""

from __future__ import annotations

import re
import shutil

import pytest

from scripts.screenshot import (
    ACCEPT,
    STORY,
    TREE,
    button,
    click,
    row_text,
    running_app,
    show_story_tree,
    start_first_story,
    story_text,
    undo_until,
    wait_for_suggestions,
    wait_idle,
)
from weave.config import load_settings
from weave.view.labels import apart
from weave.view.story_graph import OPENING_CHARS

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here"),
]
FIRST = "Once upon a time,"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("data")) as url:
        yield url


@pytest.fixture
def context(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    yield context
    context.close()


@pytest.fixture
def page(context, server):
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(server)
    return page


def grows_from(page, before: str) -> str:
    page.wait_for_function(
        "([selector, before]) => document.querySelector(selector).value !== before",
        arg=[STORY, before],
    )
    wait_idle(page)  # the next search ran (a lone suggestion may have been accepted too)
    return story_text(page)


def branch(page) -> str:
    """The "branch i of n" caption beside the sibling buttons."""
    where = re.compile(r"branch \d+ of \d+")
    return where.search(page.get_by_text(where).first.text_content()).group(0)


def opening(text: str) -> str:
    """The start of a node's label in the story tree (its first line)."""
    return " ".join(text.split())[:10]


def tree_text(page) -> str:
    """The story tree's labels, their lines joined (its tab opened first)."""
    show_story_tree(page)
    return " ".join(page.locator(TREE).first.text_content().split())


def test_accepting_a_suggestion_grows_the_story_by_exactly_its_text(page):
    page.get_by_text(FIRST, exact=True).click()  # pick it among the starting stories
    page.get_by_role("button", name="Start").click()
    page.get_by_text("Weaving").first.wait_for()  # the first read: the start page is gone
    assert page.get_by_role("button", name="Start").count() == 0
    assert page.get_by_text("Start from").count() == 0
    wait_for_suggestions(page)
    assert story_text(page) == FIRST
    shown = row_text(page, 0)
    assert shown.strip()
    button(page, ACCEPT).first.click()
    page.wait_for_function(
        "([selector, before]) => document.querySelector(selector).value !== before",
        arg=[STORY, FIRST],
    )
    grown = story_text(page)
    # prefix space: the box shows the text without its leading space; accepting restores it
    assert grown in (FIRST + " " + shown, FIRST + shown), grown


def test_the_search_graph_downloads_as_dot(page, tmp_path):
    start_first_story(page)
    first = row_text(page, 0)
    page.get_by_role("tab", name="🔎 This search's token tree").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="DOT", exact=True).click()
    path = tmp_path / "graph.dot"
    download.value.save_as(path)
    dot = path.read_text(encoding="utf-8")
    assert dot.startswith("digraph lloom {")
    assert "rankdir=LR" in dot
    assert first.split()[0] in dot  # the best suggestion's first word labels a node


def test_branch_go_back_other_branch_switch_and_reload(page):
    start_first_story(page)
    first, second = (row_text(page, i) for i in (0, 1))
    click(page, ACCEPT)
    one = grows_from(page, FIRST)
    undo_until(page, FIRST)
    click(page, ACCEPT, 1)
    two = grows_from(page, FIRST)
    assert two != one and second in two
    undo_until(page, FIRST)
    click(page, "↪ Redo")  # forward: the branch this tab was on last
    assert branch(page) == "branch 2 of 2"
    click(page, "◀ Previous")  # the first branch, kept
    assert branch(page) == "branch 1 of 2" and first in story_text(page)
    tree = tree_text(page)  # each branch labelled by what sets it apart from the other
    for mine, other in ((first, second), (second, first)):
        assert apart(mine, [other], OPENING_CHARS)[:10] in tree
    page.wait_for_url("**/?story=*&node=*")
    url, shown = page.url, story_text(page)
    page.reload()
    page.locator(STORY).wait_for()
    wait_idle(page)
    assert page.url == url and story_text(page) == shown
    assert branch(page) == "branch 1 of 2"


def test_two_tabs_add_to_one_story_and_see_each_others_branches(page, context):
    start_first_story(page)
    page.wait_for_url("**/?story=*&node=*")
    other = context.new_page()
    other.set_default_timeout(90_000)
    other.goto(page.url)
    button(other, ACCEPT).first.wait_for()
    mine, theirs = row_text(page, 0), row_text(other, 3)
    click(page, "📌 Keep", 0)  # each tab keeps a branch at the same node
    click(other, "📌 Keep", 3)
    assert opening(mine) in tree_text(other)  # the other's, too
    click(page, "🔖 Bookmark")  # any rerun: this tab now sees the other's node
    assert opening(theirs) in tree_text(page)
    assert story_text(page) == story_text(other) == FIRST  # nobody moved the other


LABEL_PX = """svg => Array.from(svg.querySelectorAll('text'))
    .map(t => parseFloat(t.getAttribute('font-size')) * t.getScreenCTM().a)"""


def smallest_label_px(page) -> float:
    """The smallest graph label on screen, in CSS pixels, in the graph now visible."""
    graph = page.locator(f"{TREE}:visible").first
    graph.wait_for()
    return min(graph.evaluate(LABEL_PX))


@pytest.mark.parametrize("opening_words", load_settings().starting_stories)
def test_graph_labels_are_readable_at_1280_by_800(browser, server, opening_words):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.set_default_timeout(90_000)
        page.goto(server)
        page.get_by_text(opening_words, exact=True).click()
        start_first_story(page)
        wait_idle(page)
        assert smallest_label_px(page) >= 11  # the search's token tree, its tab shown first
        show_story_tree(page)
        assert smallest_label_px(page) >= 11  # the story tree
    finally:
        context.close()


def test_a_click_on_a_story_tree_node_goes_there(page):
    start_first_story(page)
    click(page, ACCEPT)
    grown = story_text(page)
    undo_until(page, FIRST)
    show_story_tree(page)
    links = page.locator(TREE).first.locator("a[*|href*='node=']")  # each node's link
    assert links.count() == 3  # (start), the story, the branch taken
    url = page.url
    links.last.locator("text").first.click()  # in this page: the link is not followed
    page.wait_for_function(
        "([selector, text]) => document.querySelector(selector).value === text",
        arg=[STORY, grown],
    )
    wait_idle(page)
    assert story_text(page) == grown and page.url != url  # the URL names the node
