"""An evening at the desk (issue 34) through AppTest on the fake model: messages that go
away (item 7: an import says once what it did) and switching models says itself (item 8:
the sidebar's picker shows with one model too, and says how to add another), and typing
then ➜ Take does what it says (item 2)."""

from __future__ import annotations

from huggingface_hub import constants

from tests.test_page import FIRST, app, rows, started, story, suggestions, workspace
from weave.desk.session import Workspace
from weave.desk.spot import Piece
from weave.desk.take import KEPT, NOT_TAKEN, take
from weave.loom.store import LoomStore
from weave.view.present import md


def test_the_picker_shows_with_one_model_and_says_how_to_add_one(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    at = started()
    [box] = [s for s in at.sidebar.selectbox if s.label == "Switch model"]
    assert box.options == ["SmolLM2-135M-Instruct (embedded)"] and box.disabled
    assert any("Only this model is here" in c.value and "LLOOM_MODEL" in c.value
               for c in at.sidebar.caption)  # fmt: skip


def test_an_import_says_once_what_it_did(fake):
    at = app()
    at.file_uploader[0].set_value(("bad.json", b"not json", "application/json")).run()
    [error] = [e.value for e in at.error]
    assert error.count("cannot be imported") == 1 and "That file" not in error
    assert [t.value for t in at.toast] == [error]  # where the writer is looking, too
    at.button(key="start").click().run()  # the next story: the message has gone
    assert not [e for e in at.error if "cannot be imported" in e.value] and not at.toast
    ws = at.session_state["page"].ws
    exported = ws.library.export(ws.story_id)
    [uploader] = [u for u in at.file_uploader if u.key.startswith("import_")]
    uploader.set_value(("story.json", exported.encode(), "application/json")).run()
    assert not at.exception
    assert [t.value for t in at.toast] == ["Imported and opened “Once upon a time, (2)”."]
    assert story(at) == "Once upon a time,"
    at.button(key="bookmark").click().run()
    assert not at.toast  # said once


def test_typing_then_take_does_what_it_says(fake):
    """Item 2: the story box's edit and ➜ Take in one click (AppTest sends both in one run,
    as the browser does): the edit is applied first, then the suggestion is taken where it
    still fits, and where it does not the page says so; it is never kept in silence."""
    at = started()
    first = rows(at)[0]
    at.text_area(key="story_text").set_value(FIRST + " and then")
    at.button(key=f"{first}_go").click().run()
    assert not at.exception
    assert story(at) == FIRST + " and then"  # the edit, and nothing after it
    assert [w.value for w in at.warning if "Your edit is a new branch" in w.value] == [
        md(NOT_TAKEN)
    ]
    assert not [n for n in workspace(at).loom.nodes.values() if n.kind == "accepted"]
    at.button(key="bookmark").click().run()
    assert not [w for w in at.warning if "Your edit" in w.value]  # the line goes with a move
    # an edit that leaves the story's end as it was: the suggestion still fits, and is taken
    at = started()
    top = rows(at)[0]
    taken = suggestions(at)[0]
    at.text_area(key="story_text").set_value("Long ago. " + FIRST)
    at.button(key=f"{top}_go").click().run()
    assert story(at) == "Long ago. " + FIRST + taken
    assert not [w for w in at.warning if "Your edit" in w.value]


def test_a_click_left_from_before_another_move_keeps_its_suggestion_and_says_so(tmp_path):
    ws = Workspace(LoomStore(tmp_path))
    assert ws.start("ab")
    start = ws.cursor
    first, second = (Piece(start, text, (), False, "m", {}, 0.0) for text in (" c", " d"))
    take(ws, first, None, prefix_space=True)  # the first ➜: taken
    take(ws, second, None, prefix_space=True)  # a second ➜ before the page redrew
    assert ws.text == "ab c" and ws.notice == KEPT
    assert {n.text for n in ws.loom.children(start)} == {" c", " d"}
