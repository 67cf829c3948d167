"""Branches tell themselves apart (issue 34, item 4): labels in the story tree, Go to and
the bookmarks show what sets a node apart from its siblings, never start mid-word; new
stories get titles a writer can tell apart."""

from __future__ import annotations

import re

from weave.loom.loom import Loom
from weave.loom.store import LoomStore
from weave.view.labels import apart, ending
from weave.view.loom_view import go_to_labels, node_label, story_nodes
from weave.view.story_graph import render_story_tree

CITY = "city of Nova Haven was a"


def test_siblings_are_labelled_by_what_sets_them_apart():
    spires, gardens = f"{CITY} place of towering spires", f"{CITY} quiet garden town"
    assert apart(spires, [gardens], 30) == "…place of towering spires"
    assert apart(gardens, [spires], 30) == "…quiet garden town"
    assert apart(" there", [" lived"], 30) == "there"  # a shared space is no shared word
    assert apart("The river", [CITY], 30) == "The river"
    assert apart(CITY, [CITY + " and more"], 12) == "city of Nov…"  # all shared: its opening
    # a shared start that ends inside a word starts the label at that word
    assert apart("the towering spires", ["the towers fell"], 30) == "…towering spires"


def test_a_bookmark_label_never_starts_mid_word():
    story = "they stood at the foot of the towering skyscrapers and wept"
    label = ending(story, 30)
    assert label == "…towering skyscrapers and wept" and len(label) <= 30
    assert (
        ending("at the foot of the   towering\nskyscrapers", 30) == "…of the towering skyscrapers"
    )
    assert ending("short", 30) == "short"


def test_the_story_tree_and_go_to_tell_siblings_apart():
    loom = Loom.new("Once upon a time,")
    loom = loom.accept(f" the {CITY} place of towering spires.").undo()
    loom = loom.accept(f" the {CITY} quiet garden town.")
    source = render_story_tree(story_nodes(loom), cursor=loom.cursor).source
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', source)
    shown = {label.replace("\\n", "/") for label in labels}
    assert shown == {
        "(start)",
        "Once upon a /time,",
        "…quiet /garden town.",
        "…place of /towering sp…",
    }
    picked = [node_label(loom, n) for n in loom.nodes if loom.node(n).parent == loom.path()[1].id]
    assert sorted(picked) == [  # then how each was made (`node_label`'s provenance)
        "·· …place of towering spir… — unknown provenance",
        "·· …quiet garden town. — unknown provenance",
    ]


def test_a_run_of_single_children_is_one_entry_in_go_to_as_in_the_story_tree():
    loom = Loom.new("Once upon a time,")
    opened = loom.cursor
    for piece in (" the fox", " ran", " home."):  # as lone suggestions are taken by themselves
        loom = loom.accept(piece)
    run_end = loom.cursor
    loom = loom.go(opened).accept(" a cat sat.")
    labels = go_to_labels(loom)
    assert list(labels) == [loom.root, opened, run_end, loom.cursor]  # tree order
    assert labels[run_end] == "·· the fox ran home. — unknown provenance · 3 pieces"
    assert labels[loom.cursor] == "·· a cat sat. — unknown provenance"
    drawn = render_story_tree(story_nodes(loom), cursor=loom.cursor).source
    assert len(re.findall(r"^\ts\d+ \[", drawn, re.M)) == 4  # the run one node there too


def test_stories_that_open_alike_get_titles_told_apart(tmp_path):
    store = LoomStore(tmp_path)
    first, _ = store.create("Once upon a time,\nthere was a fox.")
    second, _ = store.create("Once upon a time,\nthere was a hare.")
    third, _ = store.create("Once upon a time,")
    titles = [store.info(sid).title for sid in (first, second, third)]
    assert titles == ["Once upon a time,", "Once upon a time, (2)", "Once upon a time, (3)"]
    store.rename(second, "The hare")  # renamable as before
    fourth, _ = store.create("Once upon a time, ")
    assert store.info(fourth).title == "Once upon a time, (2)"  # the first free number
    assert store.info(store.create("Elsewhere")[0]).title == "Elsewhere"
