"""The real page in real headless Chromium, on the real embedded model.

One server (`streamlit run lloom.py` on a free loopback port, a throwaway data folder)
serves the module's tests; it is stopped at the end.
"""

from __future__ import annotations

import re
import shutil

import pytest

from scripts.screenshot import (
    STORY,
    TREE,
    click,
    launch_browser,
    running_app,
    start_first_story,
    story_text,
    undo_until,
    wait_idle,
)

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here"),
]
FIRST = "Once upon a time,"
SUGGESTION = "input[aria-label='Suggestion']"


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
    """The start of a node's label in the story tree."""
    return " ".join(text.split())[:18]


def test_accepting_a_suggestion_grows_the_story_by_exactly_its_text(page):
    page.get_by_text(FIRST, exact=True).click()  # pick it among the starting stories
    start_first_story(page)
    assert story_text(page) == FIRST
    shown = page.locator(SUGGESTION).first.input_value()
    assert shown.strip()
    page.get_by_role("button", name="➡️").first.click()
    page.wait_for_function(
        "([selector, before]) => document.querySelector(selector).value !== before",
        arg=[STORY, FIRST],
    )
    grown = story_text(page)
    # prefix space: the box shows the text without its leading space; accepting restores it
    assert grown in (FIRST + " " + shown, FIRST + shown), grown


def test_the_search_graph_downloads_as_dot(page, tmp_path):
    start_first_story(page)
    first = page.locator(SUGGESTION).first.input_value()
    page.get_by_role("tab", name="🔎 This search").click()
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
    first, second = (page.locator(SUGGESTION).nth(i).input_value() for i in (0, 1))
    click(page, "➡️")
    one = grows_from(page, FIRST)
    undo_until(page, FIRST)
    click(page, "➡️", 1)
    two = grows_from(page, FIRST)
    assert two != one and second in two
    undo_until(page, FIRST)
    click(page, "↪️ Redo")  # forward: the branch this tab was on last
    assert branch(page) == "branch 2 of 2"
    click(page, "◀️")  # the first branch, kept
    assert branch(page) == "branch 1 of 2" and first in story_text(page)
    tree = page.locator(TREE).first.text_content()
    assert opening(first) in tree and opening(second) in tree
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
    other.locator(SUGGESTION).first.wait_for()
    mine = page.locator(SUGGESTION).nth(0).input_value()
    theirs = other.locator(SUGGESTION).nth(3).input_value()
    click(page, "📌", 0)  # each tab keeps a branch at the same node
    click(other, "📌", 3)
    assert opening(mine) in other.locator(TREE).first.text_content()  # the other's, too
    click(page, "🔖 Bookmark")  # any rerun: this tab now sees the other's node
    assert opening(theirs) in page.locator(TREE).first.text_content()
    assert story_text(page) == story_text(other) == FIRST  # nobody moved the other
