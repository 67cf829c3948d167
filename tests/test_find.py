"""Finding a branch again (issue 34, item 5): `LoomStore.find` over a real store, the
writer's own stories only, and `python -m weave loom find` in a subprocess."""

from __future__ import annotations

import json

from tests.test_cli import loom
from tests.test_page import started, story, workspace
from weave.loom.find import CONTEXT, StoryNodes, find
from weave.loom.store import LoomStore


def city(store: LoomStore) -> tuple[str, dict[str, str]]:
    """A story whose phrases span nodes: " towering" and " skyscrapers" are two accepts."""
    sid, _ = store.create("The city of Nova Haven was a")
    steps = lambda lm: (lm.accept(" place of").accept(" towering").accept(" skyscrapers.")  # noqa: E731
                        .undo().undo().accept(" quiet gardens."))  # fmt: skip
    now = store.update(sid, steps)
    return sid, {n.text: n.id for n in now.nodes.values()}


def test_a_phrase_is_found_where_it_ends_even_across_nodes(tmp_path):
    store = LoomStore(tmp_path)
    sid, ids = city(store)
    [found] = store.find("TOWERING skyscrapers")  # case ignored; two nodes
    assert (found.story_id, found.node_id) == (sid, ids[" skyscrapers."])
    assert found.match == "towering skyscrapers"
    assert found.before.endswith("Nova Haven was a place of ")
    assert found.after == "."
    [quiet] = store.find("of quiet")
    assert quiet.node_id == ids[" quiet gardens."]  # the other branch, from the same place
    [opening] = store.find("nova haven")
    assert opening.node_id == ids["The city of Nova Haven was a"]  # once, not at every child
    assert store.find("towering gardens") == []  # not a path of the story
    assert store.find("   ") == []


def test_every_story_of_the_writer_and_no_one_elses(tmp_path):
    store = LoomStore(tmp_path)
    first, _ = city(store)
    second, _ = store.create("Towering over the bay, the lighthouse")
    theirs = store.as_writer("writer@example.org")
    theirs.create("Towering waves broke")
    assert {f.story_id for f in store.find("towering")} == {first, second}
    assert [f.story_id for f in store.find("towering", first=first)][0] == first
    assert [f.title for f in theirs.find("towering")] == ["Towering waves broke"]
    store.delete(second)
    assert {f.story_id for f in store.find("towering")} == {first}
    assert len(store.find("a", limit=2)) == 2


def test_the_text_around_a_match_is_bounded():
    story = StoryNodes("s", "t", ["a", "b"], [None, "a"], ["x" * 500, "needle" + "y" * 500])
    [found] = find([story], "needle")
    assert found.node_id == "b"
    assert found.before == "x" * CONTEXT and found.after == "y" * CONTEXT


def test_loom_find_on_the_command_line(tmp_path):
    sid, ids = city(LoomStore(tmp_path))
    done = loom(tmp_path, "find", "towering skyscrapers", "--json")
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    assert row["story"] == sid and row["node"] == ids[" skyscrapers."]
    assert row["title"] == "The city of Nova Haven was a" and row["match"] == "towering skyscrapers"
    text = loom(tmp_path, "find", "gardens")
    assert text.returncode == 0 and text.stdout.startswith(f"{sid} {ids[' quiet gardens.']}  ")
    bad = loom(tmp_path, "find", "x", "--limit", "0")
    assert bad.returncode == 2 and "--limit must be a whole number in 1..1,000" in bad.stderr


def test_the_sidebar_finds_a_branch_in_any_story_and_jumps_there(fake, data_dir):
    """The page (AppTest, the fake model): the box lists matches; a click opens the node."""
    store = LoomStore(data_dir)
    other, ids = city(store)
    at = started("A fox ran through the towering grass")
    mine = workspace(at).story_id
    at.text_input(key="find_text").set_value("towering").run()
    buttons = [b for b in at.sidebar.button if b.key and b.key.startswith("found_")]
    assert len(buttons) == 2
    assert "**towering**" in buttons[0].label and "📖" not in buttons[0].label  # this story first
    assert "📖 The city of Nova Haven was a" in buttons[1].label
    assert buttons[0].disabled  # the node it is at
    buttons[1].click().run()
    assert not at.exception
    assert (workspace(at).story_id, workspace(at).cursor) == (other, ids[" towering"])
    assert at.query_params["story"] == other and story(at).endswith("a place of towering")
    at.text_input(key="find_text").set_value("fox ran").run()
    [back] = [b for b in at.sidebar.button if b.key and b.key.startswith("found_")]
    back.click().run()
    assert workspace(at).story_id == mine
    at.text_input(key="find_text").set_value("nightingale").run()
    assert any("Nothing found" in c.value for c in at.sidebar.caption)
