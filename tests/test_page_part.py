"""Taking part of a row on the page (issue 39, item 5; `page.part`) through Streamlit's
AppTest on the fake model: a click on a word (its post to the hidden box) takes the row up
to that word's end; the rest of the row comes first at the new node, where a lone
suggestion is not taken by itself over it, unless the node's search offers it already; W
(✂ Word) takes the first row's first word; a click on a row no longer shown takes nothing."""

from __future__ import annotations

import pytest

import backends
from page.part import TAKE_PICK
from tests.fake_backend import StoryFake
from tests.test_page import FIRST, read_row, rows, shaded, started, story, workspace
from weave import keys
from weave.desk.partial import word_ends


def one_way_table(beam: tuple[str, ...]) -> dict[str, float]:
    """After the story (its ','), ' the a.' and 'c.'; after ' the', ' a.' alone."""
    after = {",": {" the": 0.5, "c": 0.45}, " the": {" ": 0.95}, " ": {"a": 0.95},
             "a": {".": 0.95}, "c": {".": 0.95}}  # fmt: skip
    return after.get(beam[-1] if beam else ",", {"<eos>": 0.95})


def other_way_table(beam: tuple[str, ...]) -> dict[str, float]:
    """The model's mind changed: after ' the', 'c.' alone; after 'a', 'b.' and 'c.'."""
    after = {" the": {"c": 0.95}, "a": {"b": 0.5, "c": 0.45}, "b": {".": 0.95},
             "c": {".": 0.95}}  # fmt: skip
    return after.get(beam[-1] if beam else ",", {"<eos>": 0.95})


@pytest.fixture
def one_way(data_dir, monkeypatch) -> StoryFake:
    backend = StoryFake(table=one_way_table)
    monkeypatch.setattr(backends, "create_backend", lambda settings: backend)
    return backend


def rest_rows(at) -> list[str]:
    """The rest rows' widget keys (a row of its own: ✏️ 📌 ➜ with no number key)."""
    return [b.key[: -len("_go")] for b in at.button
            if b.key and b.key.startswith("rest_") and b.key.endswith("_go")]  # fmt: skip


def test_a_click_on_a_word_takes_the_row_up_to_it_and_the_rest_comes_first(one_way):
    at = started()
    one_way.table = other_way_table  # the searches after it offer other words than the rest
    ws = workspace(at)
    offer = ws.offers.latest(ws.cursor)
    row = next(i for i, s in enumerate(offer.result.suggestions) if s.text == " the a.")
    start, text = ws.cursor, offer.result.suggestions[row].text
    at.text_input(key=TAKE_PICK).set_value(f"{rows(at)[row]}@{word_ends(text)[0]}").run()
    assert not at.exception
    assert story(at) == FIRST + " the" and ws.loom.node(ws.cursor).parent == start
    assert at.text_input(key=TAKE_PICK).value == ""  # ready for the next click
    made = ws.loom.node(ws.cursor).provenance
    assert (made.how, made.rank) == ("partial suggestion", row + 1)
    [rest] = rest_rows(at)
    assert read_row(shaded(at)[0]) == "a."  # the rest, first, its prefix space not shown
    assert shaded(at)[0].count(f'data-lloom-at="{rest}@') == 2  # its words: " a", "."
    [lone] = ws.offers.latest(ws.cursor).result.suggestions
    assert lone.text == "c." and read_row(shaded(at)[1]) == "c."  # not taken by itself
    assert at.button(key=f"{rest}_go").proto.shortcut == ""  # 1-9 stay the suggestions'

    assert at.button(key="take_word").proto.shortcut == keys.WORD.shortcut.lower()
    at.button(key="take_word").click().run()  # W: the first row's first word, the rest's
    assert story(at) == FIRST + " the a"
    assert read_row(shaded(at)[0]) == "."
    assert read_row(shaded(at)[1])[0] in "bc"  # then the node's own suggestions
    at.button(key=f"{rest_rows(at)[0]}_go").click().run()  # ➜ takes the rest whole
    assert story(at) == FIRST + " the a." and not rest_rows(at)
    at.button(key="undo").click().run()
    assert story(at) == FIRST + " the a" and rest_rows(at)  # still offered where it was
    assert not at.exception


def test_a_click_on_a_row_no_longer_shown_takes_nothing(one_way):
    at = started()
    nodes = len(workspace(at).loom.nodes)
    at.text_input(key=TAKE_PICK).set_value("sg_gone_p_0@4").run()
    assert not at.exception and story(at) == FIRST and len(workspace(at).loom.nodes) == nodes
    at.text_input(key=TAKE_PICK).set_value(f"{rows(at)[0]}@99").run()  # past its end
    assert story(at) == FIRST and len(workspace(at).loom.nodes) == nodes


def test_the_rest_is_not_drawn_where_the_search_offers_it_already(one_way):
    at = started()  # the model's mind unchanged: after ' the' it offers ' a.' again
    offer = workspace(at).offers.latest(workspace(at).cursor)
    row = next(i for i, s in enumerate(offer.result.suggestions) if s.text == " the a.")
    at.text_input(key=TAKE_PICK).set_value(f"{rows(at)[row]}@4").run()
    assert story(at) == FIRST + " the" and not rest_rows(at)
    assert [read_row(html) for html in shaded(at)] == ["a."]  # once: the search's own row
    assert story(at) == FIRST + " the"  # and still not taken by itself
