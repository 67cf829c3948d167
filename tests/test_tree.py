"""The token tree's JSON form keeps what the page and a reopened story need."""

from __future__ import annotations

from weave.search.tree import TreeNode


def test_json_round_trip_keeps_cuts_and_half_characters():
    root = TreeNode(None, b"", 0.0)
    dragon = "🐉".encode()
    first = root.add_child(10, dragon[:2], -0.5)  # half of a character
    second = first.add_child(11, dragon[2:] + b", and", -0.7)
    second.cut = 2  # auto-stop kept "🐉,"
    second.finished = True
    again = TreeNode.from_dict(root.to_dict())
    [leaf] = again.leaves()
    assert leaf.text() == "🐉," and leaf.full_text() == "🐉, and"
    assert leaf.finished and leaf.token_ids() == [10, 11]
    assert again.to_dict() == root.to_dict()


def test_descendants_count_every_node_below():
    root = TreeNode(None, b"", 0.0)
    assert root.descendants() == 0
    a = root.add_child(1, b"a", -0.1)
    a.add_child(2, b"b", -0.2).add_child(3, b"c", -0.3)
    root.add_child(4, b"d", -0.4)
    assert root.descendants() == 4 and a.descendants() == 2
