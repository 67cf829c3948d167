"""The story tree drawn: every node, the current path highlighted, labels escaped."""

from __future__ import annotations

from weave.loom import Loom
from weave.loom_graph import START, opening, render_loom


def test_every_node_is_drawn_and_only_the_current_path_is_highlighted():
    loom = Loom.new("Once upon a time,").accept(" a fox").undo().accept(" a bear ran")
    source = render_loom(loom).source
    fox = next(n for n in loom.nodes.values() if n.text == " a fox")
    for node in loom.nodes.values():
        assert f"n{node.id} [" in source
        edge = f"n{node.parent} -> n{node.id}"
        if node.parent is not None:
            on_path = node.id != fox.id
            assert (f"{edge} [color=" in source) is on_path, node.text
    assert f'label="{START}"' in source and "a bear ran" in source
    assert 'fillcolor="#fde2ec"' in source  # the cursor


def test_labels_are_opening_words_escaped_and_bookmarks_marked():
    loom = Loom.new('He said "no" \\ <b>&amp;</b>\nand then a great deal more than that')
    node = loom.node()
    source = render_loom(loom.bookmark(node.id)).source
    assert opening(node) == 'He said "no" \\ <b>&amp;…'
    assert 'label="🔖 He said \\"no\\" \\\\ <b>&amp;amp;…"' in source
    assert opening(Loom.new("  ").node()) == "␣␣"  # a node of spaces is still visible
