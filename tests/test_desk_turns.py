"""The desk's wrong turns of a writer's evening (issue 41) through AppTest on the fake model:
every click lands where it says and every import reads right."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetStates

import backends
from tests.fake_backend import StoryFake
from tests.test_page import (
    FIRST,
    accept,
    app,
    keep,
    offer,
    spaced_table,
    started,
    status_line,
    story,
    suggestions,
    undo_to,
    workspace,
)
from weave.loom.store import LoomStore
from weave.story.bans import BanRule, Bans

TYPED = "When the tide turned, Mara walked slowly along the shore."
LONG = (Path(__file__).resolve().parent.parent / "bench" / "long_story.txt").read_text()


def browser_order(at, first: str) -> WidgetStates:
    """The widget states AppTest would send, the widget keyed `first` moved to the front:
    the order a browser sends them in, which is the order it first drew each widget (the
    sidebar's uploader, drawn on the start page, before the story box)."""
    states = at._tree.get_widget_states()
    ordered = sorted(states.widgets, key=lambda w: not w.id.endswith(f"-{first}"))
    return WidgetStates(widgets=ordered)


def test_an_edit_typed_in_one_story_never_lands_in_the_story_an_import_opens(fake, data_dir):
    """Item 1: the story box edited (and the title box) and a file imported in one script
    run (two reruns the server joined while a long search ran), the uploader's callback
    first, as the browser orders them: the import makes one new story, untouched; the edit
    is a branch of the story it was typed in, and the title that story's."""
    at = started()
    typed_in = workspace(at).story_id
    ws = workspace(at)
    exported = ws.library.export(ws.story_id)
    at.text_area(key="story_text").set_value(TYPED)
    at.text_input(key=f"title_{typed_in}").set_value("The tide")
    [uploader] = [u for u in at.file_uploader if u.key.startswith("import_")]
    uploader.set_value(("story.json", exported.encode(), "application/json"))
    at._run(browser_order(at, uploader.key))
    assert not at.exception
    store = LoomStore(data_dir)
    imported = workspace(at).story_id
    assert imported != typed_in and story(at) == FIRST  # the imported story, as it was
    assert [n.text for n in store.load(imported).nodes.values()] == ["", FIRST]
    mine = store.load(typed_in)
    assert mine.text() == TYPED and mine.node().kind == "edited"  # where it was typed
    assert len(store.stories()) == 2
    assert store.info(typed_in).title == "The tide" and store.info(imported).title != "The tide"
    said = [w.value for w in at.warning if "Your edit" in w.value]
    assert said and "saved there" in said[0]


def test_go_to_lands_where_its_entry_says_not_on_a_branch_only_kept(fake):
    """Item 2: a piece taken, a suggestion kept after it (📌: the cursor stays), then back
    up: Go to's entry that reads as the taken piece goes to it, not to the kept branch
    folded under it; the kept branch is an entry of its own."""
    at = started()
    start = workspace(at).cursor
    first = suggestions(at)[0]
    accept(at, 0)  # (and any lone suggestion after it, taken by itself)
    there, taken = workspace(at).cursor, story(at)
    keep(at, 0)
    undo_to(at, start)
    picker = at.selectbox(key="go_to")
    labels = picker.options
    shown = " ".join(first.split())  # an entry reads its piece on one line
    [entry] = [i for i, label in enumerate(labels) if label.lstrip("· ").startswith(shown)]
    picker.select_index(entry).run()
    assert not at.exception
    assert workspace(at).cursor == there and story(at) == taken
    assert any(" — kept" in label for label in labels)  # the kept branch: its own entry


def test_find_shows_its_hit_with_the_spaces_between_the_pieces(fake, data_dir):
    """Item 3: a phrase across pieces ("…her wet", " grey", " shawl and said…") is listed
    as the story reads, the spaces at the match's edges kept, the match in bold."""
    store = LoomStore(data_dir)
    sid, _ = store.create("She looked at her wet")
    store.update(sid, lambda loom: loom.accept(" grey").accept(" shawl and said nothing."))
    at = app()
    at.text_input(key="find_text").set_value("grey shawl").run()
    [hit] = [b.label for b in at.sidebar.button if b.key and b.key.startswith("found_")]
    assert hit.startswith("…She looked at her wet **grey shawl** and said nothing.…"), hit


def upload(at, name: str, doc) -> None:
    """Drop a file on 📥 Import a story (a fresh uploader after each import)."""
    [uploader] = [u for u in at.file_uploader if u.key.startswith("import_")]
    uploader.set_value((name, json.dumps(doc).encode(), "application/json")).run()
    assert not at.exception


SOCKETTEER = {  # socketteer/loom's demo file's shape: its selected node is an empty one
    "root": {"id": "r", "text": "", "visited": True, "children": [
        {"id": "s", "text": "", "children": [
            {"id": "t", "text": "Don't you want to wake up?", "children": [
                {"id": "u", "text": " You could stay here, too.", "children": []}]},
            {"id": "f", "text": "FAQ", "children": []}]}]},
    "chapters": {}, "canonical": [], "memories": {}, "frame": {}, "preferences": {},
    "workspace": {}, "selected_node_id": "s",
}  # fmt: skip
CHAT = {  # an Open Loom v1 tree: one message a node
    "id": "c", "title": "Hello", "rootNodeId": "m1", "currentNodeId": "m3",
    "bookmarkedNodes": {}, "systemMessage": "",
    "nodes": {
        "m1": {"id": "m1", "text": "Hey what's going on", "author": "user",
               "parentId": None, "childrenIds": ["m2"]},
        "m2": {"id": "m2", "text": "Hi! I'm doing well. How are you?", "author": "assistant",
               "parentId": "m1", "childrenIds": ["m3"]},
        "m3": {"id": "m3", "text": "I'm good.", "author": "user", "parentId": "m2",
               "childrenIds": []},
    },
}  # fmt: skip


def test_an_import_opens_on_a_story_to_read_and_says_in_one_plain_line_what_it_kept(fake):
    """Item 4: socketteer's demo names an empty node as its current one: the import opens
    on its richest branch instead, under one plain line (no list of the file's fields)."""
    at = app()
    upload(at, "loom_demo.json", SOCKETTEER)
    assert story(at) == "Don't you want to wake up? You could stay here, too."
    assert not [i for i in at.info if "The story is empty here" in i.value]
    [said] = [w.value for w in at.warning if "Imported from" in w.value]
    assert said == (
        "Imported from socketteer loom. Kept with the story but not shown here: "
        "its chapters, memories and 4 of the app's settings."
    )
    assert "canonical" not in said and "\n" not in said


def test_an_open_loom_v1_chat_reads_as_turns(fake):
    """Item 4: an Open Loom v1 chat's messages do not run together."""
    at = app()
    upload(at, "chat.json", CHAT)
    assert story(at) == ("Hey what's going on\n\nHi! I'm doing well. How are you?\n\nI'm good.")


@pytest.mark.slow
def test_alternatives_read_the_storys_end_in_words(data_dir):
    """Item 6, on the real embedded model: the dialog's tokens begin at a word (its window
    of the story's last tokens began inside "ridden"), the line over the
    choices names the word and its probability in two figures, and a choice the model
    began as a word-piece (" Tob") is offered as the word it begins."""
    at = started(LONG[:1553] + " She looked at her wet grey shawl and said")
    at.button(key="alt_show").click().run()
    assert not at.exception
    rows = at.session_state["page"].alternatives.rows
    assert rows[0].text[:1].isspace()
    grey = next(row for row in rows if row.text == " grey")
    at.text_input(key="alt_pick").set_value(str(grey.position)).run()
    line = next(m.value for m in at.markdown if m.value.startswith("At "))
    assert re.fullmatch(r"At “grey” \([\d.]+%\) the model offered:", line), line
    assert "0.0%" not in line
    her = next(row for row in reversed(rows) if row.text == " her")
    at.text_input(key="alt_pick").set_value(str(her.position)).run()
    labels = [b.label for b in at.button if b.key and b.key.startswith(f"alt_{her.position}_")]
    pieces = [i for i, c in enumerate(her.top) if c.text in (" M", " Tob")]
    assert pieces, [c.text for c in her.top]  # what the embedded model offers there
    for i in pieces:
        word = labels[i].rsplit(" ", 1)[0]
        assert len(word) > len(her.top[i].text) and word.startswith("␣"), labels
    assert all(re.fullmatch(r"\S+ [\d.]+%", label) for label in labels), labels


def test_again_where_nothing_changed_offers_what_would_differ(fake):
    """Item 7: 🔁 Again with the same story and settings does not pretend to search (the
    search is exact: the same 25 rows "from cache, 0.0 s"); it says the tree is the same
    and offers samples or a wider cutoff, each of which gives something new."""
    at = started()
    shown, calls = suggestions(at), len(fake.calls)
    at.button(key="again").click().run()
    assert not at.exception and len(fake.calls) == calls  # no search
    assert suggestions(at) == shown
    found = len(offer(at).result.suggestions)  # (the first LISTED are rows)
    assert status_line(at).startswith(f"✔️ The same {found} suggestions: nothing here")
    cutoff, wider = offer(at).params.cutoff, at.button(key="again_wider")
    offered = float(wider.label.removeprefix("Cutoff "))  # about half, on the slider's steps
    assert offered < cutoff
    wider.click().run()
    assert offer(at).params.cutoff == offered and len(fake.calls) > calls  # searched
    assert not any(b.key == "again_wider" for b in at.button)  # said once
    at.button(key="again").click().run()
    at.button(key="again_sample").click().run()
    assert not at.exception and workspace(at).offers.draw(workspace(at).cursor) is not None


def test_the_page_says_its_figures_as_a_writer_reads_them(fake, monkeypatch):
    """Item 8: the search's line says how varied the suggestions are and how sure the
    model is, its figures a hover away; the caption under the rows says what ⚡ marks;
    a sample's figure is its share of the draw, its log-probability a hover away."""
    monkeypatch.setenv("LLOOM_LOOKAHEAD", "2")
    at = started()
    [line] = [c for c in at.caption if c.value.startswith("✔️")]
    assert "effective choices" not in line.value and "tokens/s" not in line.value
    assert re.search(r"ways on|favourite", line.value) and "the model" in line.value
    assert "effective choices" in line.help and "tokens/s" in line.help
    under = next(c.value for c in at.caption if c.value.startswith("Bars:"))
    assert "⚡: its next suggestions are ready" in under
    at.slider(key="smp_n").set_value(3).run()
    at.button(key="sample").click().run()
    figures = re.findall(r'<span class="share" title="([^"]*)"[^>]*>([^<]*)</span>',
                         " ".join(m.value for m in at.markdown))  # fmt: skip
    assert len(figures) == 3
    assert all(re.fullmatch(r"(&lt;)?[\d.]+%", shown) for _, shown in figures), figures
    assert all("log-probabilities summed: -" in title for title, _ in figures)


def test_keep_says_what_it_kept(fake):
    """Item 9: 📌 Keep's only confirmation was a greyed button: a toast says it now."""
    at = started()
    kept = suggestions(at)[1]
    keep(at, 1)
    assert not at.exception
    [toast] = [t.value for t in at.toast]
    assert toast.startswith("Kept as a branch here: “") and kept.strip()[:10] in toast
    assert story(at) == FIRST  # the writer stays
    at.button(key="bookmark").click().run()
    assert not at.toast  # said once


@pytest.fixture
def spaced(data_dir, monkeypatch) -> StoryFake:
    """The fake model whose every story goes on with " the" or "a" (tests/test_page.py)."""
    backend = StoryFake(table=spaced_table)
    monkeypatch.setattr(backends, "create_backend", lambda settings: backend)
    return backend


def test_a_draw_says_how_many_of_the_samples_asked_the_bans_cut(spaced):
    """Item 9: 8 samples asked, some cut by a ban: the list says "of 8" and why, never a
    bare smaller count."""
    at = started()
    (ws := workspace(at)).set_settings(replace(ws.settings, bans=Bans((BanRule("the"),))))
    at.slider(key="smp_n").set_value(8).run()
    at.button(key="sample").click().run()
    assert not at.exception
    drawn = workspace(at).offers.draw(workspace(at).cursor).result
    cut = len(drawn.pruned)
    assert cut and len(drawn.samples) + cut == 8  # the fake offers " the" at every turn
    [line] = [m.value for m in at.markdown if m.value.startswith("**🎲 Samples**")]
    assert f"{len(drawn.samples)} of 8 samples" in line and f"🚫 {cut} cut by the bans" in line


def test_an_untitled_story_is_titled_by_its_opening_as_it_reads_now(fake, data_dir):
    """Item 9: a story started from "Once upon a time," and rewritten whole in the story
    box is titled by what it begins with now, in the sidebar, the tab and the library."""
    at = started()
    at.text_area(key="story_text").set_value(TYPED).run()
    sid = workspace(at).story_id
    assert (
        at.text_input(key=f"title_{sid}").value
        == "When the tide turned, Mara walked slowly along …"
    )
    assert LoomStore(data_dir).info(sid).title == workspace(at).title
    at.text_input(key=f"title_{sid}").set_value("The tide").run()  # a title given stays
    at.text_area(key="story_text").set_value(FIRST).run()
    assert at.text_input(key=f"title_{sid}").value == "The tide"


def test_a_story_id_cut_short_in_the_url_opens_the_one_story_it_begins(fake):
    """Item 9: a link whose story id lost its end opened the start page: the one story of
    the writer's it begins opens, and the URL gets the whole id."""
    sid = workspace(started()).story_id
    at = app(story=sid[:8])
    assert not at.exception and workspace(at).story_id == sid and story(at) == FIRST
    assert at.query_params["story"] == sid
    assert not [w for w in at.warning if "No story" in w.value]
