"""LLooM -> Open Loom v2 -> LLooM gives back the same story exactly, for generated looms.

The looms are made by hypothesis: any shape, any text (lone surrogates aside: the store
keeps none), every node field and provenance, checked-out children, bookmarks, a title,
settings and kept suggestions. The same story read back from LLooM's own export is the
reference: the Open Loom one must equal it.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weave.interop import openloom
from weave.interop.detect import read_loom_file
from weave.interop.foreign import IMPORTED_KEY
from weave.loom.formats import MAX_SCORE, MAX_TIME, SavedStory, loom_document, read_document
from weave.loom.loom import KINDS, Loom, Node
from weave.loom.provenance import AUTHORS, HOWS, Provenance

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
IDS = st.text("abcex-_", min_size=1, max_size=6)  # few letters: ids like "e-x" and "x"
TIMES = st.floats(0, MAX_TIME, allow_nan=False)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,  # fmt: skip
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
OBJECTS = st.dictionaries(TEXT, JSON_VALUES, max_size=4)
PROVENANCES = st.none() | st.builds(
    Provenance,
    how=st.sampled_from(HOWS),
    rank=st.none() | st.integers(1, 100),
    probability=st.none() | st.floats(0, 1),
    seed=st.none() | st.integers(0, 2**31 - 1),
    backend=st.none() | TEXT,
    model=st.none() | TEXT,
    requested=st.none() | TIMES,
    latency_ms=st.none() | st.floats(0, 1e7),
    source=st.none() | TEXT,
    author=st.none() | st.sampled_from(AUTHORS),
)


@st.composite
def stories(draw) -> SavedStory:
    ids = draw(st.lists(IDS, min_size=1, max_size=25, unique=True))
    nodes: dict[str, Node] = {}
    for i, node_id in enumerate(ids):
        parent = None if i == 0 else draw(st.sampled_from(ids[:i]))
        nodes[node_id] = Node(
            node_id, parent, "" if i == 0 else draw(TEXT), draw(st.sampled_from(KINDS)),
            draw(st.none() | st.tuples(st.integers(0, 2**31 - 1)).map(tuple)),
            draw(st.none() | TEXT), draw(st.none() | OBJECTS),
            draw(st.none() | st.floats(-MAX_SCORE, MAX_SCORE)), draw(TIMES), draw(PROVENANCES),
        )  # fmt: skip
    children = [(n.parent, n.id) for n in nodes.values() if n.parent is not None]
    checkouts = dict(draw(st.lists(st.sampled_from(children), max_size=5))) if children else {}
    loom = Loom(nodes, ids[0], draw(st.sampled_from(ids)), checkouts,
                frozenset(draw(st.lists(st.sampled_from(ids), max_size=4))))  # fmt: skip
    settings = draw(OBJECTS.filter(lambda s: IMPORTED_KEY not in s and "steering" not in s))
    suggestions = draw(st.dictionaries(st.sampled_from(ids), OBJECTS, max_size=3))
    title = draw(st.none() | TEXT.filter(str.strip))
    return SavedStory(loom, title, draw(TIMES), settings, suggestions)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stories())
def test_lloom_to_open_loom_to_lloom_is_exact(story):
    reference = read_document(loom_document("s", story))  # LLooM's own round trip
    document = openloom.document("s", story, now=0)
    back = read_loom_file(document)
    assert back.format == openloom.NAME and back.left_out == ()
    assert back.story == reference
    assert back.story.loom.nodes == story.loom.nodes
    assert list(back.story.loom.nodes) == list(story.loom.nodes)  # the order siblings keep
    assert openloom.document("s", back.story, now=0) == document  # and out again, the same


@settings(max_examples=30, deadline=None)
@given(stories())
def test_every_open_loom_export_has_one_continuation_edge_per_node_but_the_root(story):
    tree = json.loads(openloom.document("s", story, now=0))["trees"][0]
    assert tree["rootNodeIds"] == [story.loom.root]
    assert sorted(e["targetNodeId"] for e in tree["edges"]) == sorted(
        n.id for n in story.loom.nodes.values() if n.parent is not None
    )
    edge_ids = [e["id"] for e in tree["edges"]]  # one scope with the nodes' ids
    assert len(set(edge_ids)) == len(edge_ids) and not set(edge_ids) & tree["nodes"].keys()


def test_an_edge_id_never_takes_a_node_id():
    loom = Loom.new("a").accept("b", id="x").accept("c", id="e-x")
    tree = json.loads(openloom.document("s", SavedStory(loom), now=0))["trees"][0]
    assert [e["id"] for e in tree["edges"]] == [f"e-{loom.path()[1].id}", "e-e-x", "e-e-e-x"]
    assert read_loom_file(openloom.document("s", SavedStory(loom), now=0)).story.loom == loom
