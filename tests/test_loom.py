"""The loom's moves, pure: examples a writer would make, and random sequences of moves
that must keep every node, keep every node reachable, and keep the story equal to its
path's texts joined."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weave.loom.loom import Loom, NoSuchNode, title_for

OPENING = "Once upon a time,"


def test_accept_adds_a_child_and_accepting_it_again_moves_to_it():
    loom = Loom.new(OPENING).accept(" there was", token_ids=(7, 8), model="m", score=-1.5)
    assert loom.text() == OPENING + " there was"
    assert loom.node().kind == "accepted" and loom.node().score == -1.5
    again = loom.undo().accept(" there was")
    assert again.cursor == loom.cursor and len(again.nodes) == len(loom.nodes)


def test_keep_adds_branches_without_moving_and_siblings_count_them():
    loom = Loom.new(OPENING)
    kept = loom.keep(" a fox").keep(" a wolf").keep(" a fox")
    assert kept.cursor == loom.cursor and kept.text() == OPENING
    assert [c.text for c in kept.children()] == [" a fox", " a wolf"]
    wolf = kept.go(kept.child_with_text(kept.cursor, " a wolf").id)
    assert wolf.sibling_position() == (2, 2)
    assert wolf.sibling(-1).text() == OPENING + " a fox"
    assert wolf.sibling(+1) is wolf  # nowhere to go


def test_an_edit_branches_at_the_last_node_boundary_before_the_change():
    loom = Loom.new(OPENING).accept(" there was").accept(" a fox.")
    edited = loom.edit(OPENING + " there was a wolf.")
    assert edited.text() == OPENING + " there was a wolf."
    assert edited.node().text == " a wolf." and edited.node().kind == "edited"
    assert edited.node().parent == loom.node().parent  # a sibling of " a fox."
    assert len(edited.nodes) == len(loom.nodes) + 1
    inside = loom.edit("Once upon a night, there was")  # inside the first node
    assert inside.node().parent == loom.root and inside.node().text.startswith("Once upon a")


def test_an_edit_back_to_a_node_boundary_moves_there_and_adds_nothing():
    loom = Loom.new(OPENING).accept(" there was").accept(" a fox.")
    cut = loom.edit(OPENING)
    assert cut.text() == OPENING and cut.nodes == loom.nodes
    assert cut.redo().redo().text() == loom.text()  # the branch you were on is checked out
    assert loom.edit("").cursor == loom.root


def test_undo_then_redo_returns_to_the_branch_you_were_on():
    loom = Loom.new(OPENING).accept(" a").accept(" b")
    other = loom.undo().undo().accept(" c")  # a second branch at the first node
    back = other.go(loom.cursor).undo().undo()
    assert back.redo().redo().cursor == loom.cursor
    assert other.undo().redo().cursor == other.cursor


def test_redo_without_a_checkout_takes_the_newest_child():
    loom = Loom.new(OPENING).keep(" a").keep(" b")
    assert loom.redo().text() == OPENING + " b"
    assert Loom.new(OPENING).redo_target() is None


def test_undo_at_the_root_stays_and_the_root_is_empty():
    loom = Loom.new(OPENING).undo()
    assert loom.text() == "" and loom.cursor == loom.root and loom.undo() is loom


def test_bookmarks_and_unknown_nodes():
    loom = Loom.new(OPENING)
    marked = loom.bookmark(loom.cursor)
    assert marked.bookmarks == {loom.cursor}
    assert marked.bookmark(loom.cursor, on=False).bookmarks == frozenset()
    with pytest.raises(NoSuchNode):
        loom.go("nope")
    with pytest.raises(ValueError):
        loom.accept("x", kind="dreamt")


def test_token_ids_of_a_path_are_known_only_when_every_node_has_them_for_that_model():
    loom = Loom.new("ab", token_ids=(1,), model="m").accept("c", token_ids=(2, 3), model="m")
    assert loom.token_ids(model="m") == (1, 2, 3)
    assert loom.token_ids(model="other") is None
    assert loom.accept("d").token_ids(model="m") is None


def test_title_is_the_first_line():
    assert title_for("  Once\nupon   a time ") == "Once"  # issue 34: its first line
    assert title_for("\n\n  Once upon   a time,\nthere was") == "Once upon a time,"
    assert len(title_for("word " * 40)) == 48
    assert title_for(" \n\t ") == "Untitled"  # a whitespace-only story is never titled ""


# -- random sequences of moves ------------------------------------------------------------
TEXT = st.text(alphabet="ab .", max_size=4)
MOVES = st.one_of(
    st.tuples(st.just("accept"), TEXT),
    st.tuples(st.just("keep"), TEXT),
    st.tuples(st.just("edit"), st.integers(0, 40), TEXT),
    st.tuples(st.just("undo")),
    st.tuples(st.just("redo")),
    st.tuples(st.just("sibling"), st.sampled_from([-1, 1])),
    st.tuples(st.just("go"), st.integers(0, 1000)),
    st.tuples(st.just("bookmark"), st.integers(0, 1000), st.booleans()),
)


def apply(loom: Loom, move: tuple) -> Loom:
    """Apply one move and check what that move promises."""
    name, *args = move
    ids = list(loom.nodes)
    if name == "accept":
        after = loom.accept(args[0])
        assert after.text() == loom.text() + args[0]
    elif name == "keep":
        after = loom.keep(args[0])
        assert after.cursor == loom.cursor
        assert not args[0] or after.child_with_text(loom.cursor, args[0]) is not None
    elif name == "edit":
        text = loom.text()[: args[0]] + args[1]
        after = loom.edit(text)
        assert after.text() == text
    elif name == "undo":
        after = loom.undo()
        assert after.cursor == (loom.node().parent or loom.root)
    elif name == "redo":
        after = loom.redo()
        assert after.cursor == (loom.redo_target() or loom.cursor)
    elif name == "sibling":
        after = loom.sibling(args[0])
        assert after.node().parent == loom.node().parent
    elif name == "go":
        after = loom.go(ids[args[0] % len(ids)])
        path = after.path()
        assert all(after.checkouts[p.id] == c.id for p, c in zip(path, path[1:], strict=False))
    else:
        after = loom.bookmark(ids[args[0] % len(ids)], args[1])
    return after


def check_invariants(before: Loom, after: Loom) -> None:
    for node_id, node in before.nodes.items():  # nothing deleted, nothing changed
        assert after.nodes[node_id] == node
    assert after.root == before.root
    seen: set[str] = set()
    for node_id, node in after.nodes.items():  # parents come first: all reach the root
        assert (node.parent is None) == (node_id == after.root)
        assert node.parent is None or node.parent in seen
        assert node_id == after.root or node.text  # only the root is empty
        seen.add(node_id)
    for parent in after.nodes:
        texts = [c.text for c in after.children(parent)]
        assert len(texts) == len(set(texts))  # an identical child is reused, never doubled
    assert after.text() == "".join(n.text for n in after.path())
    assert after.path()[0].id == after.root
    assert after.bookmarks <= after.nodes.keys()
    assert all(p in after.nodes and c in after.nodes for p, c in after.checkouts.items())


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab .", max_size=6), st.lists(MOVES, max_size=40))
def test_random_moves_keep_every_node_reachable_and_the_story_its_path(opening, moves):
    loom = Loom.new(opening)
    first = loom
    for move in moves:
        after = apply(loom, move)
        check_invariants(loom, after)
        assert len(after.nodes) <= len(loom.nodes) + 1  # a move adds one node at most
        loom = after
    check_invariants(first, loom)
    for node_id in loom.nodes:  # every node can be shown, and its story is its path
        assert loom.go(node_id).text() == "".join(n.text for n in loom.path(node_id))
