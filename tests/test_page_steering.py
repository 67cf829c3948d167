"""The page's Memory & notes panel and What the model sees, through Streamlit's AppTest
on the deterministic fake model: set memory, search, reload, still there; the note and
the lorebook edited, switched off and deleted (AppTest cannot upload a file: the
SillyTavern import is tested through the command line, tests/test_steering_cli.py)."""

from __future__ import annotations

import re

from tests.test_page import app, started, workspace
from weave.story.steering import LoreEntry, Steering


def memory_key(at) -> str:
    """The memory box's key: its widgets are named anew when the steering changes
    elsewhere, as when the page first shows it (1)."""
    return f"st_memory_{at.query_params['story']}_1"


def seen(at) -> str:
    """What the model sees, as the page shows it."""
    return "\n".join(c.value for c in at.code)


def test_memory_set_search_reload_still_there(fake):
    at = started()
    calls = len(fake.calls)
    at.text_area(key=memory_key(at)).set_value("A dark tale.").run()
    assert not at.exception
    assert workspace(at).settings.steering.memory == "A dark tale."
    assert len(fake.calls) > calls  # searched again: the old search was made without it
    assert "[memory · " in seen(at) and "A dark tale." in seen(at)
    offer = workspace(at).offers.latest(workspace(at).cursor)
    memory = tuple(fake.tokenize("A dark tale.\n"))
    assert offer.result.context_ids[: len(memory)] == memory  # the search read it first
    again = app(story=at.query_params["story"], node=at.query_params["node"])
    assert not again.exception
    assert again.text_area(key=memory_key(again)).value == "A dark tale."
    assert "A dark tale." in seen(again)


def test_the_note_and_the_lorebook_are_edited_switched_off_and_deleted(fake):
    at = started("a cab. a bac,\nabc abc,\nb a c,")
    sid = at.query_params["story"]
    at.text_area(key=f"st_note_{sid}_1").set_value("[Keep it dark.]").run()
    at.number_input(key=f"st_depth_{sid}_1").set_value(2).run()
    at.text_input(key=f"st_new_keys_{sid}_1").set_value("bac, cab")
    at.text_area(key=f"st_new_text_{sid}_1").set_value("The bac is a cab.")
    next(b for b in at.button if b.label == "➕ Add entry").click().run()
    assert not at.exception
    ws = workspace(at)
    entry = LoreEntry(("bac", "cab"), "The bac is a cab.")
    assert ws.settings.steering == Steering(note="[Keep it dark.]", note_depth=2, lore=(entry,))
    assert "Lorebook entries fired: bac." in [c.value for c in at.caption]
    at.toggle(key=f"st_on_{sid}_2_0").set_value(False).run()
    assert workspace(at).settings.steering.lore[0].enabled is False
    assert "No lorebook entry fired." in [c.value for c in at.caption]
    at.button(key=f"st_delete_{sid}_2_0").click().run()
    assert workspace(at).settings.steering.lore == ()
    assert not at.exception


def test_another_tabs_memory_is_shown_not_overwritten(fake):
    one = started()
    two = app(story=one.query_params["story"], node=one.query_params["node"])
    one.text_area(key=memory_key(one)).set_value("A dark tale.").run()
    two.slider(key="cfg_max_depth").set_value(7).run()  # saves its settings
    assert not two.exception
    assert workspace(two).settings.steering.memory == "A dark tale."
    boxes = [t.value for t in two.text_area if t.key and t.key.startswith("st_memory_")]
    assert boxes == ["A dark tale."]
    assert workspace(one).store.settings(one.query_params["story"])["steering"]["memory"] == (
        "A dark tale."
    )


def test_a_story_past_the_window_says_how_much_was_left_out(fake):
    fake._context_length = 60  # the fake model's window: the story below is ~120 tokens
    at = started("abc " * 40)
    at.text_area(key=memory_key(at)).set_value("cab.").run()
    assert not at.exception
    [left] = [c.value for c in at.caption if c.value.startswith("✂️")]
    assert re.match(r"✂️ The story's first \d+ tokens are left out", left)
    searched = workspace(at).offers.latest(workspace(at).cursor).result.context_ids
    memory = tuple(fake.tokenize("cab.\n"))
    assert searched[: len(memory)] == memory  # the memory is never cut
    assert len(searched) + workspace(at).offers.latest(workspace(at).cursor).params.max_depth <= 60


def test_an_entry_past_a_cap_is_one_line_saying_the_cap(fake):
    """Issue 31.9: 101 keys, or a key of 201 characters, showed a red exception box."""
    at = started("a cab. a bac,")
    sid, story = at.query_params["story"], workspace(at).text
    many = ", ".join(f"k{i}" for i in range(101))
    long = "x" * 201
    for keys, line in (
        (many, "An entry holds at most 100 keys; this one has 101."),
        (long, "A key holds at most 200 characters; “xxxxxxxxxxxxxxxxxxxx…” has 201."),
    ):
        at.text_input(key=f"st_new_keys_{sid}_1").set_value(keys)
        at.text_area(key=f"st_new_text_{sid}_1").set_value("lore")
        next(b for b in at.button if b.label == "➕ Add entry").click().run()
        assert not at.exception
        assert [e.value for e in at.error] == [f"**Not added.** {line}"]
        assert workspace(at).settings.steering.lore == () and workspace(at).text == story
    at.text_input(key=f"st_new_keys_{sid}_1").set_value("cab")
    at.text_area(key=f"st_new_text_{sid}_1").set_value("lore")
    next(b for b in at.button if b.label == "➕ Add entry").click().run()
    at.text_input(key=f"st_keys_{sid}_2_0").set_value(many).run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "**Not saved.** An entry holds at most 100 keys; this one has 101."
    ]
    assert workspace(at).settings.steering.lore == (LoreEntry(("cab",), "lore"),)
