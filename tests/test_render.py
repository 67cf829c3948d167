"""The graph renderer, through `.source` and, where graphviz's `dot` is installed, through
the SVG it draws (what a reader sees, so escaping is checked end to end)."""

from __future__ import annotations

import math
import random
import re
import shutil
import xml.etree.ElementTree as ET
from itertools import count

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fake_backend import VOCAB, FakeBackend
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.search.tree import TreeNode
from weave.view.present import visible
from weave.view.render import BEST_COLOR, Fit, chain, render_tree, wrapped_label
from weave.view.story_graph import START, StoryNode, opening, render_story_tree

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is missing")
SVG = "{http://www.w3.org/2000/svg}"


def tree_of(spec: dict, *, finished_leaves: bool = True) -> TreeNode:
    """{"piece": (probability, {children...})} -> a tree; leaves are finished beams."""
    root = TreeNode(None, b"", 0.0)
    counter = count()

    def grow(node: TreeNode, children: dict) -> None:
        for piece, (p, below) in children.items():
            child = node.add_child(next(counter), piece.encode("utf-8"), math.log(p))
            grow(child, below)
            child.finished = finished_leaves and not below

    grow(root, spec)
    return root


WIDE = Fit(columns=50, children=50, nodes=1000, line=100, lines=1)  # all shown, whole


def nodes(source: str) -> dict[str, str]:
    """name -> raw DOT label of every node statement."""
    found = re.findall(r'^\t(n\d+|root) \[label=("(?:[^"\\]|\\.)*"|\S+)', source, re.M)
    return dict(found)


def texts(source: str) -> list[str]:
    """Every node's label as drawn: unquoted, lines joined by '/'."""
    return sorted(label.strip('"').replace("\\n", "/") for label in nodes(source).values())


def edges(source: str) -> list[str]:
    return re.findall(r"^\t\S+ -> \S+ \[.*\]$", source, re.M)


def svg_node_texts(graph) -> list[str]:
    svg = ET.fromstring(graph.pipe(format="svg"))
    return [
        "".join(text.itertext())
        for group in svg.iter(f"{SVG}g")
        if group.get("class") == "node"
        for text in group.iter(f"{SVG}text")
    ]


STORY = {
    " upon": (0.9, {
        " a": (0.5, {" time": (0.8, {",": (0.7, {})})}),
        " the": (0.3, {}),
    }),
}  # fmt: skip


def test_single_child_chains_merge_into_one_node():
    source = render_tree(tree_of(STORY), story_tail="Once").source
    assert texts(source) == ["Once", "a time,", "the", "upon"]  # leading spaces not drawn
    assert len(edges(source)) == 3


def test_edges_carry_the_run_probability_given_its_parent():
    source = render_tree(tree_of(STORY)).source
    # " a time," is 0.5 * 0.8 * 0.7 = 28% of what follows " upon"
    assert re.search(r'-> n\d+ \[label="28%"', source)
    assert re.search(r'-> n\d+ \[label="90%"', source)
    assert re.search(r'-> n\d+ \[label="30%"', source)


def test_chain_stops_at_a_finished_node():
    root = tree_of({"a": (0.5, {"b": (0.5, {})})})
    assert [n.piece for n in chain(root.children[0]).nodes] == [b"a", b"b"]


def test_the_best_beam_is_highlighted_and_only_it():
    tree = tree_of(STORY)
    source = render_tree(tree).source
    best_edges = [e for e in edges(source) if BEST_COLOR in e]
    # by joint probability " upon the" (0.9 * 0.3 = 0.27) beats " upon a time," (0.252)
    assert len(best_edges) == 2
    the = [name for name, text in nodes(source).items() if text == "the"][0]
    assert any(f"-> {the} " in e for e in best_edges)
    # an explicit best beam overrides
    time_leaf = next(leaf for leaf in tree.leaves() if leaf.piece == b",")
    source = render_tree(tree, best=time_leaf.token_ids()).source
    time = [name for name, text in nodes(source).items() if "time" in text][0]
    assert any(f"-> {time} " in e and BEST_COLOR in e for e in edges(source))


def test_edges_are_shaded_by_probability():
    source = render_tree(tree_of(STORY), best=[]).source
    alphas = {
        m.group(1): int(m.group(2), 16)
        for m in re.finditer(r'label="(\d+%)" color="#[0-9a-f]{6}([0-9a-f]{2})"', source)
    }
    assert alphas["90%"] > alphas["30%"] > alphas["28%"]


NASTY = 'say "hi" \\ <b>&amp;</b> \\N \\l'


def test_labels_are_escaped_in_the_source():
    tree = tree_of({NASTY: (0.5, {})})
    source = render_tree(tree, story_tail='a "quoted" \\ tail', fit=WIDE).source
    label = nodes(source)["n1"]
    assert label == '"say \\"hi\\" \\\\ <b>&amp;amp;</b> \\\\N \\\\l"'
    assert 'root [label="a \\"quoted\\" \\n\\\\ tail"' in source  # on two lines


@needs_dot
def test_nasty_labels_draw_exactly_as_written():
    odd = ["line\nbreak\ttab", "nul\x00here", "עברית RTL", "e\u0301 combining",
           "👩‍👩‍👧 emoji", "<table>&lt;"]  # fmt: skip
    tree = tree_of({text: (0.1, {}) for text in [NASTY, *odd]})
    # token pieces are bytes; only the story's text can hold a lone surrogate
    texts = svg_node_texts(render_tree(tree, fit=WIDE, story_tail="lone \ud800 end"))
    assert visible(NASTY) == NASTY
    assert NASTY in texts
    assert "line↵break⇥tab" in texts
    assert "nul␀here" in texts
    assert "lone \ufffd end" in texts
    for text in odd[2:]:
        assert text in texts


def test_long_runs_wrap_on_two_lines_with_the_whole_run_in_the_tooltip():
    long = "word " * 30
    source = render_tree(tree_of({long: (0.5, {})})).source
    assert nodes(source)["n1"] == '"word word \\nword word w…"'
    assert "word word word word word word word word" in source.split("tooltip=")[1]


def test_wrapped_labels_break_after_spaces_and_escape_each_line():
    assert wrapped_label("short", 12, 2) == "short"
    assert wrapped_label("a rather long label here", 12, 2) == "a rather \\nlong label…"
    assert wrapped_label("unbreakablewordsgoon", 8, 2) == "unbreaka\\nbleword…"
    # a backslash at a line's end stays a character, not an escape of the line break
    assert wrapped_label("end\\ \\next", 5, 2) == "end\\\\ \\n\\\\next"


def search_tree(seed: int = 3):
    params = SearchParams(cutoff=0.05, split_limit=0, max_depth=8, max_suggestions=40)
    return expand(FakeBackend(seed=seed), [VOCAB.index("x")], params)


def test_thirty_suggestions_stay_readable():
    result = search_tree()
    assert len(result.suggestions) >= 25
    fit = Fit(columns=50, children=50, nodes=1000)  # nothing folded
    source = render_tree(result.tree, best=result.suggestions[0].token_ids, fit=fit).source
    tokens = sum(len(leaf.path()) for leaf in result.tree.leaves())
    named = nodes(source)
    assert len(named) - 1 < tokens  # chains merged: fewer nodes than tokens
    finished = [leaf for leaf in result.tree.leaves() if leaf.finished]
    assert source.count('style="rounded,filled"') == len(finished)  # one node per beam


@needs_dot
def test_a_big_tree_draws():
    png = render_tree(search_tree().tree).pipe(format="png")
    assert png.startswith(b"\x89PNG")


@needs_dot
@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4, unique=True))
def test_any_text_draws_as_its_visible_form(pieces):
    tree = tree_of({piece: (0.2, {}) for piece in pieces})
    texts = svg_node_texts(render_tree(tree, fit=WIDE))
    for piece in pieces:
        shown = visible(piece).strip(" ") or visible(piece).replace(" ", "\u2423")
        # SVG text collapses runs of whitespace; compare with spaces squeezed
        assert " ".join(shown.split()) in {" ".join(t.split()) for t in texts}


# -- folding: a graph that stays readable however many beams there are ---------------------
def more_nodes(source: str) -> dict[str, int]:
    """name -> k of every "+k more" node."""
    found = re.findall(r'^\t(n\d+) \[label="\+(\d+) more"', source, re.M)
    return {name: int(k) for name, k in found}


def test_a_wide_fan_shows_its_likeliest_children_and_folds_the_rest():
    probs = [0.3, 0.2, 0.1, 0.08, 0.07] + [0.25 / 95] * 95
    tree = tree_of({f"w{i}": (p, {}) for i, p in enumerate(probs)})
    source = render_tree(tree, fit=Fit(children=5)).source
    shown = [t for t in texts(source) if t.startswith("w")]
    assert sorted(shown) == ["w0", "w1", "w2", "w3", "w4"]
    [(more, k)] = more_nodes(source).items()
    assert k == 95
    # the folded runs' pooled probability is on the edge to "+95 more"
    assert re.search(rf'-> {more} \[label="25%"', source)
    tooltip = source.split(f"\t{more} [")[1].split("\n")[0]
    assert "w5 0.3% | w6 0.3%" in tooltip  # the folded runs are named in its tooltip


def test_deep_paths_fold_past_the_column_limit_and_the_best_beam_stays_highlighted():
    deep = {"a": (0.5, {"b": (0.5, {})}), "z": (0.5, {})}
    for letter in "cdefg":  # a split at every level: six columns of runs
        deep = {letter: (0.6, deep), letter.upper(): (0.4, {})}
    tree = tree_of(deep)
    best = next(leaf for leaf in tree.leaves() if leaf.piece == b"b").token_ids()
    source = render_tree(tree, best=best, fit=Fit(columns=3)).source
    assert {"g", "f", "e"} <= set(texts(source)) and "d" not in texts(source)
    [(more, k)] = more_nodes(source).items()
    assert k == 4  # every suggestion under 'd': D, C, ab, z
    assert any(f"-> {more} " in e and BEST_COLOR in e for e in edges(source))


def test_the_node_budget_keeps_the_likeliest_runs_and_always_the_best_beam():
    tree = tree_of({f"w{i}": (0.5 / 40 if i else 0.001, {}) for i in range(40)})
    unlikely = [tree.children[0].token_id]  # w0, the least likely, named as the best
    source = render_tree(tree, best=unlikely, fit=Fit(children=100, nodes=10)).source
    shown = [t for t in texts(source) if t.startswith("w")]
    assert len(shown) == 10 and "w0" in shown
    assert list(more_nodes(source).values()) == [30]
    w0 = [name for name, text in nodes(source).items() if text == "w0"][0]
    assert any(f"-> {w0} " in e and BEST_COLOR in e for e in edges(source))


# -- label size, measured on what `dot` draws ----------------------------------------------
PAGE_PX = 800  # the main area of a 1280-px window with Streamlit's sidebar open


def smallest_label_px(graph, width_px: int = PAGE_PX) -> tuple[float, float]:
    """(smallest text size, drawing height) in CSS px when the SVG is shown at most
    `width_px` wide, as `st.graphviz_chart` does: natural size (1 pt = 4/3 px) or
    scaled down to fit."""
    svg = ET.fromstring(graph.pipe(format="svg"))
    _, _, width_pt, height_pt = (float(v) for v in svg.get("viewBox").split())
    scale = min(4 / 3, width_px / width_pt)
    sizes = [float(t.get("font-size")) for t in svg.iter(f"{SVG}text")]
    return min(sizes) * scale, height_pt * scale


def widest_tree(depth: int = 5, fan: int = 6) -> TreeNode:
    """Every run longer than a label can show, a wide fan everywhere: the worst case of
    ordinary prose (a label of twelve 'W's is wider, and rare)."""
    words = "Whereupon Marguerite mused, wondering"
    spec: dict = {}
    for level in range(depth):
        spec = {f" {words} {level}.{i}": (1 / fan, spec) for i in range(fan)}
    return tree_of(spec)


@needs_dot
@pytest.mark.parametrize("name", ["widest", "fake search"])
def test_labels_stay_at_least_11px_at_page_width(name):
    tree = widest_tree() if name == "widest" else search_tree().tree
    tail = "Whereupon the Marquise of Montgomery wondered"
    px, height = smallest_label_px(render_tree(tree, story_tail=tail))
    assert px >= 11
    assert height < 1200


@needs_dot
@pytest.mark.slow
def test_a_hundred_suggestions_at_cutoff_0_are_no_longer_a_tall_column(mlx_backend):
    # (the story ends at a comma: a healed search's spellings of its last word can pool)
    story = mlx_backend.tokenize("Once upon a time, in a small village by the sea,")
    params = SearchParams(cutoff=0.0, split_limit=0, max_suggestions=100)
    result = expand(mlx_backend, story, params)
    assert len(result.suggestions) == 100 and len(result.tree.children) > 50
    graph = render_tree(result.tree, best=result.suggestions[0].token_ids, story_tail="sea,")
    px, height = smallest_label_px(graph)
    assert px >= 11 and height < 400  # before folding: 3,700 px tall
    assert sum(more_nodes(graph.source).values()) == 100 - (len(nodes(graph.source)) - 2)


# -- the story tree (the loom) ----------------------------------------------------------------
def story_nodes(spec: list[tuple[str, str | None, str]], cursor: str, bookmarks=()) -> list:
    """(id, parent, text) rows -> StoryNodes with the path to `cursor` flagged."""
    parents = {node_id: parent for node_id, parent, _ in spec}
    path, at = set(), cursor
    while at is not None:
        path.add(at)
        at = parents[at]
    return [StoryNode(i, p, t, on_path=i in path, bookmarked=i in bookmarks) for i, p, t in spec]


def drawn(graph) -> dict[str, str]:
    """node id (from the `id` attribute) -> label as drawn (lines joined by '/')."""
    found = re.findall(r'\[label=("(?:[^"\\]|\\.)*"|[^\s\]]+)[^\]]*? id=(\w+)', graph.source)
    return {node_id: text.strip('"').replace("\\n", "/") for text, node_id in found}


LOOM = [("r", None, ""), ("a", "r", "Once upon"), ("b", "a", " a time,"), ("c", "b", " there"),
        ("d", "c", " lived"), ("e", "b", " long ago")]  # fmt: skip


def test_story_chains_merge_and_the_cursor_stands_alone():
    graph = render_story_tree(story_nodes(LOOM, "d"), cursor="d")
    # a→b is one run (b branches), c→d is cut at the cursor
    assert drawn(graph) == {"r": "(start)", "b": "Once upon a /time,", "c": "there",
                            "d": "lived", "e": "long ago"}  # fmt: skip
    assert re.search(r'id=b [^\]]*tooltip="Once upon a time, \(2 steps\)"', graph.source)
    path_edges = [e for e in edges(graph.source) if BEST_COLOR in e]
    assert len(path_edges) == 3  # start → "Once upon a time," → there → lived
    assert re.search(r'label=lived [^\]]*fillcolor="#fde2ec"', graph.source)


def test_bookmarks_stand_alone_and_are_marked():
    graph = render_story_tree(story_nodes(LOOM, "d", bookmarks={"a"}), cursor="d")
    labels = drawn(graph)
    assert labels["a"] == "★ Once upon" and labels["b"] == "a time,"
    assert re.search(r"id=a [^\]]*peripheries=2", graph.source)


def test_story_labels_are_opening_words_escaped_and_a_spaces_node_is_visible():
    text = 'He said "no" \\ <b>&amp;</b>\nand then a great deal more than that'
    nodes = [StoryNode("r", None, ""), StoryNode("a", "r", text, on_path=True)]
    source = render_story_tree(nodes, cursor="a").source
    assert 'label="He said \\"no\\" \\n\\\\ <b>&amp;amp;<…"' in source
    assert 'tooltip="He said \\"no\\" \\\\ <b>&amp;amp;</b>↵and then' in source
    assert opening(nodes[1]) == 'He said "no" \\ <b>&amp;…'
    assert opening(nodes[0]) == START
    assert opening(StoryNode("s", "r", "  ")) == "␣␣"  # a node of spaces is still visible


@needs_dot
def test_story_nodes_carry_their_id_and_a_link_for_click_to_jump():
    graph = render_story_tree(story_nodes(LOOM, "d"), cursor="d",
                              url=lambda node_id: f"?story=s1&node={node_id}")  # fmt: skip
    svg = ET.fromstring(graph.pipe(format="svg"))
    groups = {g.get("id"): g for g in svg.iter(f"{SVG}g") if g.get("class") == "node"}
    assert {"r", "b", "c", "d", "e"} <= set(groups)
    links = {a.get("{http://www.w3.org/1999/xlink}href") for a in svg.iter(f"{SVG}a")}
    assert "?story=s1&node=e" in links  # the XML holds '&amp;': an href a browser follows
    assert all(a.get("target") == "_top" for a in svg.iter(f"{SVG}a"))


def long_loom(steps: int) -> list[tuple[str, str | None, str]]:
    """A path of `steps` nodes, each with a side branch (so no two merge)."""
    spec: list = [("r", None, "")]
    for i in range(steps):
        parent = f"p{i - 1}" if i else "r"
        spec += [(f"p{i}", parent, f" step {i}"), (f"x{i}", parent, f" aside {i}")]
    return spec


def test_a_long_path_keeps_its_end_and_folds_its_beginning():
    graph = render_story_tree(story_nodes(long_loom(30), "p29"), cursor="p29", fit=Fit(columns=5))
    labels = drawn(graph)
    assert [labels[f"p{i}"] for i in range(26, 30)] == [f"step {i}" for i in range(26, 30)]
    assert labels["p25"] == "⋯ 26 earlier"  # p0 … p25, a click goes to p25
    assert "p24" not in labels and "r" not in labels
    assert "aside 27" in labels.values()  # branches from the drawn path stay, those
    assert "aside 26" not in labels.values()  # from the folded part go with it


def test_a_wide_fan_of_branches_shows_the_path_and_the_newest():
    spec = [("r", None, ""), *[(f"b{i}", "r", f" branch {i}") for i in range(30)]]
    graph = render_story_tree(story_nodes(spec, "b3"), cursor="b3")
    shown = {node_id for node_id in drawn(graph) if node_id.startswith("b")}
    assert shown == {"b3", "b29", "b28", "b27"}
    assert re.search(r'label="\+26 more"', graph.source)
    # named as the token graph names what it folds (weave.view.folding): 12, then how many more
    more = next(line for line in graph.source.splitlines() if "+26 more" in line)
    assert 'tooltip="branch 0 | branch 1 | branch 2 | branch 4 |' in more
    assert more.endswith('| branch 12 | … 14 more"]')


def test_a_story_tree_must_hold_its_cursor_and_parents():
    with pytest.raises(ValueError, match="cursor"):
        render_story_tree(story_nodes(LOOM, "d"), cursor="zz")
    with pytest.raises(ValueError, match="parent"):
        render_story_tree([StoryNode("r", None, ""), StoryNode("a", "q", "x")], cursor="r")


@needs_dot
def test_a_big_story_tree_keeps_labels_at_least_11px_at_page_width():
    rng = random.Random(7)
    words = ["Whereupon", "the", "Marquise", "wandered", "towards", "Montgomery", "harbour"]
    spec: list = [("r", None, "")]
    for i in range(400):
        parent = rng.choice(spec[-12:] if rng.random() < 0.85 else spec)[0]
        spec.append((f"n{i}", parent, " " + " ".join(rng.choices(words, k=rng.randint(2, 9)))))
    graph = render_story_tree(story_nodes(spec, "n399", bookmarks={"n50", "n51"}), cursor="n399")
    px, height = smallest_label_px(graph)
    assert px >= 11 and height < 1200
    assert len(drawn(graph)) <= 31  # 30 runs and the start
