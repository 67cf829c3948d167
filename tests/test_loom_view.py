"""The loom as the page shows it (`weave.view.loom_view`): nodes to draw and nodes to pick."""

from __future__ import annotations

from weave.loom.loom import Loom
from weave.loom.provenance import Provenance
from weave.view.loom_view import node_label, story_nodes, story_tree


def test_the_path_and_bookmarks_are_marked_and_every_node_links_to_itself():
    loom = Loom.new("Once upon a time,").accept(" a cat")
    cat = loom.cursor
    loom = loom.undo().accept(" a dog").bookmark(cat)
    nodes = {n.id: n for n in story_nodes(loom)}
    assert list(nodes) == list(loom.nodes)
    assert {i for i, n in nodes.items() if n.on_path} == {n.id for n in loom.path()}
    assert [i for i, n in nodes.items() if n.bookmarked] == [cat] and not nodes[cat].on_path
    source = story_tree(loom, "s1").source
    assert f"?story=s1&amp;node={cat}" in source  # each node opens its own URL
    assert f"?story=s1&amp;node={loom.cursor}" in source


def test_a_node_label_shows_its_depth_opening_bookmark_and_provenance():
    loom = Loom.new("Once upon a time,").accept(" a cat", provenance=Provenance("typed"))
    assert node_label(loom, loom.cursor) == "·· a cat — typed"
    assert node_label(loom.bookmark(loom.cursor), loom.cursor) == "·· a cat 🔖 — typed"
    assert node_label(loom, loom.root).endswith("(start)")
    older = loom.accept(" sat.")  # made before provenance was kept
    assert node_label(older, older.cursor) == "··· sat. — unknown provenance"
