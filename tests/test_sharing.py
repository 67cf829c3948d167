"""A loom shared live (issue 43), in the store, on both databases: a story's owner shares it
by verified address, to read or to co-write; each writer keeps their own place in it; a
node says who added it; a page learns within a second that a co-writer's branch came
(`LoomStore.watch`), from another process too; and nothing of a writer's stories that
were not shared with them is reachable."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from weave.desk.session import READ_ONLY, Workspace
from weave.interop.files import export_json
from weave.loom.loom import Loom
from weave.loom.provenance import Provenance
from weave.loom.store import LoomStore
from weave.loom.store_errors import InvalidInput, NotOwner, ReadOnlyStory, StoryNotFound

ROOT = Path(__file__).resolve().parent.parent
ISSUER = "https://id.example.org"
ANA, BEN, CAL = "ana@example.org", "ben@example.org", "cal@example.org"


def logged_in(store: LoomStore, name: str, email: str) -> LoomStore:
    """`store` as the login `name` whose provider verified `email` (as the page signs one in)."""
    writer = store.as_writer(f"{ISSUER} {name}")
    writer.sign_in(email)
    return writer


def typed(text: str):
    return lambda loom: loom.accept(text, provenance=Provenance("typed"))


@pytest.fixture
def group(stories_at):
    """Ana, who owns a story, and Ben, to whom it may be shared."""
    store = LoomStore(stories_at)
    ana, ben = logged_in(store, "ana", ANA), logged_in(store, "ben", BEN)
    sid, _ = ana.create("The lighthouse keeper", provenance=Provenance("typed"))
    ana.update(sid, typed(" counted the ships."))
    return ana, ben, sid


def test_a_story_shared_to_read_is_listed_opened_and_moved_about_but_not_written(group):
    ana, ben, sid = group
    with pytest.raises(StoryNotFound):
        ben.load(sid)
    ana.share(sid, BEN, may_write=False)
    (info,) = ben.stories()
    assert (info.id, info.role, info.owner) == (sid, "reader", ANA)
    seen = ben.load(sid)
    assert seen.text() == "The lighthouse keeper counted the ships."
    with pytest.raises(ReadOnlyStory, match="shared with you to read, not to write"):
        ben.update(sid, typed(" Ben's line."))
    with pytest.raises(ReadOnlyStory):
        ben.save_settings(sid, {"cutoff": 0.5})
    for owners_only in (lambda: ben.rename(sid, "Ben's now"), lambda: ben.delete(sid),
                        lambda: ben.give(sid, BEN), lambda: ben.share(sid, CAL, may_write=True),
                        lambda: ben.shares(sid)):  # fmt: skip
        with pytest.raises(NotOwner, match="only its owner may"):
            owners_only()
    first = seen.node().parent
    moved = ben.update(sid, lambda loom: loom.go(first).bookmark(first))  # their own place
    assert ben.load(sid) == moved and moved.cursor == first
    mine = ana.load(sid)
    assert mine.cursor != first and not mine.bookmarks and len(mine.nodes) == 3
    ben.save_suggestions(sid, first, {"suggestions": []})  # a record of what was offered
    assert ana.shares(sid)[0].email == BEN and not ana.shares(sid)[0].may_write


def test_co_writers_add_branches_keep_their_own_places_and_each_node_says_who(group):
    ana, ben, sid = group
    ana.share(sid, BEN, may_write=True)
    assert ben.stories()[0].role == "co-writer"
    at = ana.load(sid).cursor
    made = Provenance("typed")
    bens = ben.update(sid, lambda loom: loom.at(at).accept(" Ben saw a sail.", provenance=made))
    anas = ana.update(
        sid, lambda loom: loom.at(at).keep(" Ana heard a bell.", provenance=made).bookmark(at)
    )
    assert bens.node().provenance.writer == BEN
    kept = anas.child_with_text(at, " Ana heard a bell.")
    assert kept.provenance.writer == ANA and anas.cursor == at  # Ana stayed
    both = ben.load(sid)
    assert both.cursor == bens.cursor and not both.bookmarks  # Ben's place, Ben's marks
    assert {n.text for n in both.children(at)} == {" Ben saw a sail.", " Ana heard a bell."}
    assert ana.load(sid).bookmarks == {at}
    assert "by ben@example.org" in bens.node().provenance.describe()
    ben.save_settings(sid, {"cutoff": 0.2})  # a co-writer steers the story too
    assert ana.settings(sid) == {"cutoff": 0.2}
    assert ana.info(sid).updated >= ben.stories()[0].created


def test_a_share_made_to_an_address_goes_to_its_login_and_can_be_taken_back(group):
    ana, _, sid = group
    ana.share(sid, CAL, may_write=True)  # Cal has never logged in
    assert [s.email for s in ana.shares(sid)] == [CAL]
    cal = logged_in(ana, "cal-77", CAL)
    assert [s.id for s in cal.stories()] == [sid]
    cal.update(sid, typed(" Cal wrote."))
    ana.unshare(sid, CAL)
    assert cal.stories() == [] and ana.shares(sid) == []
    with pytest.raises(StoryNotFound):
        cal.load(sid)
    assert ana.load(sid).at(ana.load(sid).cursor).text().endswith("ships.")
    with pytest.raises(InvalidInput, match="is yours already"):
        ana.share(sid, ANA, may_write=True)


def test_a_deleted_story_leaves_the_lists_of_those_it_was_shared_with(group):
    ana, ben, sid = group
    ana.share(sid, BEN, may_write=True)
    ana.delete(sid)
    assert ben.stories() == [] and ben.stories(deleted=True) == []
    with pytest.raises(StoryNotFound):
        ben.load(sid)
    ana.restore(sid)
    assert [s.id for s in ben.stories()] == [sid]


def test_nothing_of_a_story_not_shared_is_reachable(group):
    ana, ben, sid = group
    private, _ = ana.create("Ana's diary: the key is under the third stone.")
    ana.share(sid, BEN, may_write=True)
    assert [s.id for s in ben.stories()] == [sid]
    assert ben.find("third stone") == [] and ana.find("third stone")[0].story_id == private
    assert [f.story_id for f in ben.find("lighthouse")] == [sid]  # what was shared is found
    for action in (
        lambda: ben.load(private), lambda: ben.info(private), lambda: export_json(ben, private),
        lambda: ben.settings(private), lambda: ben.suggestions(private, "x"),
        lambda: ben.watch(private), lambda: ben.update(private, typed(" Ben's.")),
        lambda: ben.save_suggestions(private, "x", {}), lambda: ben.unshare(private, BEN),
    ):  # fmt: skip
        with pytest.raises(StoryNotFound):
            action()
    assert ana.load(private).text() == "Ana's diary: the key is under the third stone."


def test_a_page_watching_a_story_learns_of_another_process_s_branch_within_a_second(
    group, stories_at
):
    ana, ben, sid = group
    ana.share(sid, BEN, may_write=True)
    watch = ana.watch(sid)
    before = watch()
    assert before == len(ana.load(sid).nodes)
    code = ("import sys\nfrom weave.loom.store import LoomStore\nfrom weave.loom.provenance "
            "import Provenance\nben = LoomStore(sys.argv[1], writer=sys.argv[2])\n"
            "made = Provenance('typed')\n"
            "ben.update(sys.argv[3], lambda lm: lm.accept(' A sail!', provenance=made))"
            )  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, str(stories_at), ben.writer, sid],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    saved = time.monotonic()
    while watch() == before:
        assert time.monotonic() - saved < 1.0, "the branch did not show within a second"
        time.sleep(0.02)
    assert watch() == before + 1
    grown: Loom = ana.load(sid)
    (new,) = [n for n in grown.nodes.values() if n.text == " A sail!"]
    assert new.provenance.writer == BEN


def test_a_reader_s_tab_moves_about_and_is_told_plainly_why_it_adds_nothing(group):
    ana, ben, sid = group
    ana.share(sid, BEN, may_write=False)
    tab = Workspace(ben)
    assert tab.open(sid) and tab.role == "reader"
    tab.edit(tab.text + " Ben's own ending.")
    assert tab.notice == READ_ONLY and not tab.pending and tab.save_error is None
    assert len(ana.load(sid).nodes) == 3
    tab.undo()  # moving about is theirs
    assert tab.save_error is None and ben.load(sid).cursor == tab.cursor != ana.load(sid).cursor
    tab.set_settings(replace(tab.settings, record={"cutoff": 0.5}))  # their sliders: their own view
    assert tab.save_error is None and ana.settings(sid) == {}
    ana.share(sid, BEN, may_write=True)
    tab.open(sid)
    tab.edit(tab.text + " Ben's own ending.")
    assert tab.role == "co-writer" and tab.save_error is None
    assert ana.load(sid).node(tab.cursor).provenance.writer == BEN
