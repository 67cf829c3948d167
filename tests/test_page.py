"""The page's flows through Streamlit's AppTest: elements asserted, never an exception.

Most flows run on the deterministic fake model (the flow is under test, not the model),
installed by patching `backends.create_backend`; two run on the real embedded model,
and a few on real llama.cpp-shaped servers that answer badly (tests/hostile_servers.py).
Every test gets its own data folder (LLOOM_DATA_DIR, a real SQLite store) and a fresh
shared backend. The four page bugs of issue 10 each have a regression test here.
"""

from __future__ import annotations

import html
import json
import math
import re
import socket
import sqlite3
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import backends
import lloom
from backends import BackendError
from page.suggestions import LISTED
from tests.fake_backend import StoryFake
from tests.hostile_servers import hostile_server
from tests.test_rows import assert_openings_first
from tests.test_token_ids import oov_loom
from weave.desk import session
from weave.desk.lone import AUTO_ACCEPTS
from weave.desk.spot import Offer, Piece
from weave.loom.store import LoomStore
from weave.view import messages, present
from weave.view.loom_view import go_to_labels

PAGE = str(Path(__file__).resolve().parent.parent / "lloom.py")
FIRST = "Once upon a time,"
ROW_HTML = '<div style="white-space: pre-wrap'


def spaced_table(beam: tuple[str, ...]) -> dict[str, float]:
    """Two suggestions after any story, one with a leading space: ' the.' and 'a.'."""
    return {".": 0.9} if beam and beam[-1] in (" the", "a") else {" the": 0.5, "a": 0.4}


@pytest.fixture
def spaced(data_dir, monkeypatch) -> StoryFake:
    backend = StoryFake(table=spaced_table)
    monkeypatch.setattr(backends, "create_backend", lambda settings: backend)
    return backend


def app(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def started(text: str | None = None) -> AppTest:
    at = app()
    if text is not None:
        at.radio(key="start_choice").set_value("✍️ Write my own").run()
        at.text_area(key="start_text").set_value(text)
    at.button(key="start").click().run()
    assert not at.exception
    return at


def story(at: AppTest) -> str:
    return at.text_area(key="story_text").value


def rows(at: AppTest) -> list[str]:
    """The suggestion rows' widget keys, in rank order (each row has a → button)."""
    return [b.key[: -len("_go")] for b in at.button
            if b.key and b.key.startswith("sg_") and b.key.endswith("_go")]  # fmt: skip


def shaded(at: AppTest) -> list[str]:
    """The rows' text as HTML (one block per row, shaded or not)."""
    return [m.value for m in at.markdown if m.value.startswith(ROW_HTML)]


def suggestions(at: AppTest) -> list[str]:
    """The rows' texts as a writer reads them (faint marks read as the spaces they mark)."""
    return [read_row(html) for html in shaded(at)]


def read_row(row_html: str) -> str:
    row_html = re.sub(r'<span class="(share|variants)\b.*?</span>', "", row_html)  # its figures
    text = html.unescape(re.sub(r"<[^>]+>", "", row_html))
    return present.typed_text(text.replace("·", " "))


def edit_box(at: AppTest, index: int):
    """Click row `index`'s ✏️; its text box, in its place."""
    key = rows(at)[index]
    at.button(key=f"{key}_edit").click().run()
    return at.text_input(key=key)


def accept(at: AppTest, index: int) -> AppTest:
    return at.button(key=f"{rows(at)[index]}_go").click().run()


def keep(at: AppTest, index: int) -> AppTest:
    return at.button(key=f"{rows(at)[index]}_keep").click().run()


def backend_error(at: AppTest) -> str:
    """The page's one message about the model ('' when there is none)."""
    return " ".join(e.value for e in at.error if e.icon == "🔌")


def workspace(at: AppTest) -> session.Workspace:
    return at.session_state["page"].ws


def offer(at: AppTest) -> Offer:
    """The suggestions the page shows (the current node's latest search)."""
    return workspace(at).offers.latest(workspace(at).cursor)


def status_line(at: AppTest) -> str:
    """The search's one line: how many suggestions, from where, in how long."""
    return next(c.value for c in at.caption if c.value.startswith("✔️"))


def branch(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("branch "))


def sidebar_stats(at: AppTest) -> str:
    return " ".join(m.value for m in at.sidebar.markdown if "forward calls" in m.value)


GRAPH = re.compile(r'<div class="lloom-graph"></div><script>[^=]*= (".*");</script>', re.DOTALL)


def graphs(at: AppTest) -> list[str]:
    """The graphs on the page, as the SVG graphviz's `dot` drew (only the shown tab's): the
    JSON string the page's script puts in the graph's box."""
    found = (GRAPH.fullmatch(h.proto.body) for h in at.get("html"))
    return [json.loads(match.group(1)) for match in found if match]


def token_tree(at: AppTest) -> str:
    """This search's token tree (its tab is the one shown first)."""
    (graph,) = graphs(at)
    return graph


def story_tree(at: AppTest) -> str:
    """The story tree, its tab shown for the reading and then the token tree's again."""
    at.session_state["graph_tab"] = "🌳 Story tree"
    (graph,) = graphs(at.run())
    at.session_state["graph_tab"] = "🔎 This search's token tree"
    at.run()
    return graph


def drawn_node(tree: str, node_id: str) -> str:
    """The SVG drawing the node `node_id` ('' when it is not drawn by itself)."""
    found = re.search(rf'<g id="{node_id}" class="node">.*?(?=<!--|</svg>)', tree, re.DOTALL)
    return found.group(0) if found else ""


def undo_to(at: AppTest, node_id: str) -> AppTest:
    """Undo until the cursor is at `node_id` (accepting may have taken lone suggestions too)."""
    while workspace(at).cursor != node_id:
        at.button(key="undo").click().run()
    return at


def go_to(at: AppTest, node_id: str) -> AppTest:
    picker = next(s for s in at.selectbox if s.key.startswith("go_"))
    return picker.set_value(node_id).run()


# -- the floor ------------------------------------------------------------------------------
def test_start_page_offers_the_starting_stories(fake):
    at = app()
    assert not at.exception
    options = at.radio(key="start_choice").options
    assert options[0] == FIRST and len(options) == 4
    assert at.button(key="start")


def test_start_shows_story_suggestions_graphs_and_stats(fake):
    at = started()
    assert story(at) == FIRST
    assert 5 <= len(suggestions(at)) <= 25
    assert len(graphs(at)) == 1  # the search's token tree; the story tree's tab is not drawn
    assert "<svg" in token_tree(at)
    labels = {b.label for b in at.get("download_button")}
    assert {"DOT", "PNG", "Story .txt", "Story .md", "Loom .json", "Open Loom v2",
            "Tree .json", "Graph .svg"} <= labels  # fmt: skip
    sidebar = " ".join(m.value for m in at.sidebar.markdown)
    assert "forward calls" in sidebar and "fake-model" in sidebar
    assert status_line(at).endswith(messages.worth_words(offer(at).result.suggestions))
    assert "<svg" in story_tree(at)  # drawn when its tab is shown
    assert branch(at) == "branch 1 of 1"
    assert at.button(key="undo").disabled is False  # back to the empty start
    assert at.button(key="redo").disabled is True


def test_own_story_with_nothing_written_asks_for_words(fake):
    at = app()
    at.radio(key="start_choice").set_value("✍️ Write my own").run()
    at.button(key="start").click().run()
    assert not at.exception
    assert "Write a few words" in at.warning[0].value
    assert "story_text" not in [area.key for area in at.text_area]


def test_accept_adds_a_child_holding_exactly_the_suggestion(fake):
    at = started()
    start = workspace(at).cursor
    best = offer(at).result.suggestions[0]
    assert suggestions(at)[0] == best.text.removeprefix(" ")  # shown without prefix space
    accept(at, 0)
    assert not at.exception
    loom = workspace(at).loom
    [child] = loom.children(start)
    assert child.kind == "accepted" and child.text == best.text
    assert child.token_ids == best.token_ids and child.model == "fake-model"
    assert child.params["max_suggestions"] == 25 and child.score == best.score
    assert story(at).startswith(FIRST + best.text)  # a lone next suggestion may follow


def test_an_edited_suggestion_is_accepted_as_edited(fake):
    at = started()
    had_space = offer(at).result.suggestions[1].text.startswith(" ")
    edit_box(at, 1).set_value("my own words")  # sent with the form: by ➜ Take (or Enter)
    accept(at, 1)
    assert not at.exception
    space = " " if had_space else ""
    node = workspace(at).loom.path()[2]
    assert node.text == space + "my own words" and node.token_ids is None  # tokenized afresh


def test_without_prefix_space_the_box_holds_the_whole_text(fake):
    at = started()
    at.checkbox(key="cfg_prefix_space").uncheck().run()
    best = offer(at).result.suggestions[0]
    assert suggestions(at)[0] == best.text
    accept(at, 0)
    assert workspace(at).loom.path()[2].text == best.text


@pytest.mark.parametrize("before, after", [(True, False), (False, True)])
def test_toggling_prefix_space_mid_story_neither_doubles_nor_drops_the_space(
    spaced, before, after
):  # bug (1): the boxes kept the text the other choice had put there
    at = started()
    at.checkbox(key="cfg_prefix_space").set_value(before).run()
    at.checkbox(key="cfg_prefix_space").set_value(after).run()
    assert suggestions(at) == ([" the.", "a."] if not after else ["the.", "a."])
    accept(at, 0)
    assert not at.exception
    assert story(at).startswith(FIRST + " the.") and not story(at).startswith(FIRST + "  the")


def test_an_edit_is_a_new_branch_and_searches_again(fake):
    at = started()
    before = suggestions(at)
    first_node = workspace(at).cursor
    at.text_area(key="story_text").set_value(FIRST + " ab ab").run()
    assert not at.exception
    assert story(at) == FIRST + " ab ab"
    assert suggestions(at) != before
    loom = workspace(at).loom
    assert loom.node().kind == "edited" and loom.node().text == " ab ab"
    assert loom.node().parent == first_node  # branched where the texts part
    at.text_area(key="story_text").set_value("ab").run()  # a rewrite: a sibling, nothing lost
    loom = workspace(at).loom
    assert loom.text() == "ab" and loom.text(first_node) == FIRST
    assert branch(at) == "branch 2 of 2"


def test_undo_and_redo_move_in_the_tree(fake):
    at = started()
    after_start = suggestions(at)
    accept(at, 0)  # a lone suggestion after it may be accepted too: a longer path
    grown, steps = story(at), len(workspace(at).loom.path()) - 2
    for _ in range(steps):
        at.button(key="undo").click().run()
    assert story(at) == FIRST and suggestions(at) == after_start  # this node's own
    for _ in range(steps):
        at.button(key="redo").click().run()
    assert story(at) == grown
    assert not at.exception


def test_a_lone_suggestion_is_accepted_by_itself_a_few_times_at_most(data_dir, monkeypatch):
    certain = StoryFake(table=lambda beam: {"a": 0.95})  # one beam: nothing clears the cutoff
    monkeypatch.setattr(backends, "create_backend", lambda settings: certain)
    at = started()
    assert not at.exception
    path = workspace(at).loom.path()
    assert [n.kind for n in path[1:]] == ["typed"] + ["accepted"] * AUTO_ACCEPTS
    assert story(at) == FIRST + "a" * 12 * AUTO_ACCEPTS
    assert len(suggestions(at)) == 1  # then the writer decides
    said = " ".join(i.value for i in at.info)
    assert f"Accepted {AUTO_ACCEPTS} lone suggestions" in said and "“aaaa" in said
    at.button(key="undo").click().run()  # one step takes the whole chain back
    assert story(at) == FIRST and workspace(at).cursor == path[1].id
    assert not at.info  # the message went with them, and undo stays undone:
    assert len(workspace(at).loom.nodes) == len(path)
    at.button(key="redo").click().run()
    assert workspace(at).cursor == path[2].id and not at.info  # redo: one piece forward


def test_config_change_searches_with_the_new_parameters(fake):
    at = started()
    at.slider(key="cfg_max_suggestions").set_value(5).run()
    assert not at.exception
    assert len(suggestions(at)) == 5
    at.slider(key="cfg_max_depth").set_value(2).run()
    assert all(len(text) <= 2 * 4 for text in suggestions(at))


def test_config_defaults_come_from_the_model_settings(fake):
    at = started()
    assert at.slider(key="cfg_cutoff").value == pytest.approx(0.05)  # [search]: fake has none
    assert at.selectbox(key="cfg_rule").value == "relative"
    assert at.slider(key="cfg_max_depth").value == 12
    assert at.checkbox(key="cfg_auto_stop").value is True


def test_backend_error_keeps_story_and_suggestions(fake):
    at = started()
    shown = suggestions(at)
    fake.down = True
    at.slider(key="cfg_max_suggestions").set_value(len(shown) - 1).run()  # a search: it fails
    assert not at.exception
    assert story(at) == FIRST
    assert suggestions(at) == shown
    message = backend_error(at)
    assert "connection refused" in message and "127.0.0.1:9" in message
    fake.down = False
    at.button(key="again").click().run()
    assert not backend_error(at) and suggestions(at) and offer(at).node_id == workspace(at).cursor


def test_a_backend_that_cannot_load_leaves_the_page_working(data_dir, monkeypatch):
    def broken(settings):
        raise BackendError("no server address: set LLAMA_API_URL", backend="llamacpp")

    monkeypatch.setattr(backends, "create_backend", broken)
    at = started()
    assert not at.exception
    assert story(at) == FIRST
    assert "LLAMA\\_API\\_URL" in backend_error(at)


def test_settings_are_taken_as_given_or_refused_by_name(fake, data_dir, monkeypatch):
    config = data_dir / "config.toml"
    config.write_text("[search]\nmax_suggestions = 3\n[stories]\nstarting = ['Once']\n")
    monkeypatch.setenv("LLOOM_CONFIG", str(config))
    at = started()
    assert at.slider(key="cfg_max_suggestions").value == 3  # once silently clamped to 5
    assert len(suggestions(at)) == 3
    config.write_text("[sample]\nn = 17\n")
    st.cache_resource.clear()
    at = app()
    assert not at.exception
    [error] = [e.value.replace("\\", "") for e in at.error]
    assert f"{config} [sample] n must be a whole number in 1..16, not 17" in error


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the socket is


@pytest.mark.parametrize(
    "variable, name", [("LLAMA_API_URL", "llamacpp"), ("VLLM_API_URL", "vllm")]
)
def test_an_unreachable_server_is_one_clear_message(data_dir, monkeypatch, variable, name):
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv(variable, url)  # a real connection, refused
    at = started()
    assert not at.exception
    assert story(at) == FIRST
    error = backend_error(at)
    assert "cannot connect" in error and url in error
    assert name in " ".join(m.value for m in at.sidebar.markdown)
    at.text_area(key="story_text").set_value(FIRST + " still here").run()
    assert not at.exception and story(at) == FIRST + " still here"
    at.button(key="retry_backend").click().run()  # tries again, fails the same way
    assert not at.exception and "cannot connect" in backend_error(at)


# -- the real embedded model ----------------------------------------------------------------
@pytest.mark.slow
def test_the_real_model_suggests_and_accepting_or_switching_back_costs_no_prefill(data_dir):
    at = started()  # backends.create_backend is the real registry: MLX, embedded model
    assert not at.exception and not backend_error(at)
    first = offer(at).result
    assert first.stats.backend == "mlx" and first.stats.model == "SmolLM2-135M-Instruct"
    held = [c.value for c in at.sidebar.caption if c.value.startswith("KV fragment tree:")]
    assert held and "MiB held, at most 1,024 MiB" in held[0]  # the tree's bytes, capped
    assert len(first.suggestions) >= 5 and all(s.text.strip() for s in first.suggestions)
    assert suggestions(at)[0] == first.suggestions[0].text.removeprefix(" ")
    at.slider(key="cfg_max_depth").set_value(4).run()
    at.slider(key="cfg_max_suggestions").set_value(5).run()
    start = workspace(at).cursor
    best, other = offer(at).result.suggestions[:2]
    keep(at, 1)  # a branch to switch to later, never searched
    accept(at, 0)
    assert not at.exception and not backend_error(at)
    assert workspace(at).loom.text(workspace(at).loom.path()[2].id) == FIRST + best.text
    # the accepted beam's ids were kept, so its KV was reused: nothing to prefill
    assert "prefill tokens: **0**" in sidebar_stats(at)
    kept = workspace(at).loom.child_with_text(start, other.text)
    go_to(at, kept.id)  # switch to the kept branch: the fragment tree holds its path
    assert story(at) == FIRST + other.text and workspace(at).cursor == kept.id
    assert offer(at).result.stats.prefill_tokens == 0
    assert "prefill tokens: **0**" in sidebar_stats(at)
    go_to(at, start)
    at.button(key="again").click().run()  # back at the start: the same tree, nothing searched
    at.button(key="again_wider").click().run()  # searched wider: the story is all held
    assert offer(at).result.stats.prefill_tokens == 0 and not backend_error(at)


def samples(at: AppTest) -> list[str]:
    """The sample rows' texts, in the order listed."""
    return [read_row(m.value) for m in at.markdown if m.value.startswith('<div class="sample"')]


def sample_rows(at: AppTest) -> list[str]:
    """The sample rows' widget keys, in the order listed."""
    return [b.key[: -len("_go")] for b in at.button
            if b.key and b.key.startswith("smp_") and b.key.endswith("_go")]  # fmt: skip


def best_first(drawn: list) -> list:
    return sorted(drawn, key=lambda s: -s.logprob)


@pytest.mark.slow
def test_samples_are_drawn_here_taken_or_kept_as_sampled_branches(data_dir):
    at = started()  # the real embedded model: MLX samples in one batched run
    start = workspace(at).cursor
    at.slider(key="smp_n").set_value(3)
    at.slider(key="smp_max_tokens").set_value(8).run()
    at.button(key="sample").click().run()
    assert not at.exception and not backend_error(at)
    drawn = workspace(at).offers.draw(workspace(at).cursor).result.samples
    assert len(samples(at)) == 3 and all(s.token_ids for s in drawn)
    assert "This node's samples" in " ".join(h.value for h in at.sidebar.subheader)
    drawn = best_first(drawn)
    keys_ = sample_rows(at)
    at.button(key=f"{keys_[1]}_keep").click().run()
    at.button(key=f"{keys_[0]}_go").click().run()
    loom = workspace(at).loom
    taken = loom.path()[2]
    assert taken.kind == "sampled" and taken.token_ids == drawn[0].token_ids
    assert taken.text == drawn[0].text and taken.params["n"] == 3
    assert {c.kind for c in loom.children(start)} == {"sampled"}
    assert len(loom.children(start)) == (2 if drawn[1].text != drawn[0].text else 1)
    assert samples(at) == []  # they belong to the node they were drawn at
    searched = [r for (node, *_), r in workspace(at).offers.results.items() if node == taken.id]
    assert searched[0].stats.prefill_tokens == 0  # the search after a sample reads nothing again
    undo_to(at, start)
    assert len(samples(at)) == 3


def draw_samples(at: AppTest, n: int) -> AppTest:
    at.slider(key="smp_n").set_value(n).run()
    return at.button(key="sample").click().run()


def test_samples_are_taken_or_kept_as_branches_and_stay_at_their_node(fake):
    at = draw_samples(started(), 3)
    assert not at.exception and len(samples(at)) == 3
    start, drawn = (
        workspace(at).cursor,
        best_first(workspace(at).offers.draw(workspace(at).cursor).result.samples),
    )
    assert samples(at) == [s.text.removeprefix(" ") for s in drawn]  # best first, whole
    assert not [box for box in at.text_input if box.key.startswith("smp_")]  # rows, not boxes
    values = [m.value for m in at.markdown]
    below = values.index(next(v for v in values if v.startswith('<div class="sample"')))
    assert below > max(values.index(row) for row in shaded(at))  # under the suggestions
    keys_ = sample_rows(at)
    at.button(key=f"{keys_[2]}_keep").click().run()
    assert workspace(at).cursor == start and len(samples(at)) == 3  # kept: nothing moved
    at.button(key=f"{keys_[0]}_go").click().run()
    taken = workspace(at).loom.path()[2]
    assert (taken.kind, taken.text, taken.token_ids) == ("sampled", drawn[0].text,
                                                         drawn[0].token_ids)  # fmt: skip
    assert samples(at) == []  # not shown at another node
    undo_to(at, start)
    assert len(samples(at)) == 3  # back where they were drawn


def test_a_sample_edited_in_its_row_is_taken_as_edited(fake):
    at = draw_samples(started(), 2)
    key = sample_rows(at)[1]
    at.button(key=f"{key}_edit").click().run()
    at.text_input(key=key).set_value("my own words")
    at.button(key=f"{key}_go").click().run()  # the form's first button: what Enter presses
    taken = workspace(at).loom.path()[2]
    assert not at.exception and taken.kind == "sampled"
    assert taken.text.strip() == "my own words" and story(at).startswith(FIRST)


def test_a_failed_draw_keeps_the_story_and_the_suggestions(fake):
    at = started()
    shown = suggestions(at)
    fake.down = True
    draw_samples(at, 2)
    assert not at.exception
    assert "connection refused" in backend_error(at)
    assert story(at) == FIRST and suggestions(at) == shown and samples(at) == []


# -- branches, navigation, bookmarks ---------------------------------------------------------
def test_branch_go_back_other_branch_switch_and_reload(fake):
    at = started()
    start = workspace(at).cursor
    first, second = suggestions(at)[:2]
    accept(at, 0)
    one = workspace(at).loom.path()[2].id
    undo_to(at, start)
    assert story(at) == FIRST and at.button(key="redo").disabled is False
    accept(at, 1)
    two = workspace(at).loom.path()[2].id
    assert two != one and workspace(at).loom.children(start)[0].id == one  # nothing lost
    undo_to(at, two)
    assert branch(at) == "branch 2 of 2"
    at.button(key="sibling_prev").click().run()
    assert workspace(at).cursor == one and branch(at) == "branch 1 of 2"
    assert at.button(key="sibling_prev").disabled and not at.button(key="sibling_next").disabled
    grown = story(at)
    at.button(key="undo").click().run()
    at.button(key="redo").click().run()  # forward again: to the branch this tab was on
    assert workspace(at).cursor == one and story(at) == grown
    again = app(story=at.query_params["story"], node=at.query_params["node"])
    assert not again.exception
    assert workspace(again).cursor == one and story(again) == grown
    assert branch(again) == "branch 1 of 2"
    tree = story_tree(again)
    assert drawn_node(tree, one)  # the cursor's node; the other branch is one run
    assert first.split()[0][:6] in tree and second.split()[0][:6] in tree


def test_keep_adds_a_branch_without_moving(fake):
    at = started()
    start, text = workspace(at).cursor, story(at)
    keep(at, 2)
    assert not at.exception
    assert workspace(at).cursor == start and story(at) == text
    [kept] = workspace(at).loom.children(start)
    assert kept.text == offer(at).result.suggestions[2].text
    assert at.button(key=f"{rows(at)[2]}_keep").disabled  # kept once
    go_to(at, kept.id)
    assert story(at) == FIRST + kept.text and suggestions(at)  # searched there


def test_the_story_tree_highlights_the_path_and_a_picked_node_is_gone_to(fake):
    at = started()
    accept(at, 0)
    loom = workspace(at).loom
    tree = story_tree(at)
    assert "(start)" in tree and "Once upon a time," in tree
    for node in (loom.path()[0], loom.node()):  # the root, the cursor (runs between merge)
        drawn = drawn_node(tree, node.id)
        assert 'stroke="#d6336c"' in drawn  # highlighted
        assert f'href="?story={at.query_params["story"]}&amp;node={node.id}"' in drawn
    entries = go_to_labels(loom)  # a run (FIRST and what was taken after it) is one entry
    target = next(n for n in entries if n not in (loom.root, loom.cursor))
    go_to(at, target)
    assert story(at) == loom.text(target) and story(at).startswith(FIRST) and not at.exception
    assert at.query_params["node"] == target


def test_bookmarks_are_listed_jumped_to_and_removed(fake):
    at = started()
    accept(at, 0)
    marked, text = workspace(at).cursor, story(at)
    at.button(key="bookmark").click().run()
    assert at.button(key="bookmark").label == "🔖 Unmark"
    assert "★" in story_tree(at)
    at.button(key="undo").click().run()
    at.button(key=f"mark_{marked}").click().run()
    assert workspace(at).cursor == marked and story(at) == text
    again = app(story=at.query_params["story"])  # bookmarks are saved with the story
    assert again.button(key=f"mark_{marked}")
    again.button(key="bookmark").click().run()
    assert f"mark_{marked}" not in [b.key for b in again.sidebar.button]


def test_two_tabs_add_to_one_tree_and_see_each_other(fake, data_dir):
    one = started()
    sid = one.query_params["story"]
    two = app(story=sid)
    start = workspace(one).cursor
    accept(one, 0)
    two.run()  # the other tab's next rerun
    assert workspace(two).cursor == start and story(two) == FIRST  # its own cursor
    assert len(workspace(two).loom.children(start)) == 1  # and the other tab's node
    accept(two, 1)
    theirs = workspace(two).loom.path()[2].id
    one.run()
    assert len(workspace(one).loom.children(start)) == 2 and drawn_node(story_tree(one), theirs)
    stored = LoomStore(data_dir).load(sid)
    assert len(stored.children(start)) == 2


def test_two_tabs_when_a_save_fails_in_one_lose_nothing_and_never_fail(fake, data_dir):
    one = started()  # issue 27: the failing tab's next moves raised NoSuchNode on every rerun
    sid, start = one.query_params["story"], workspace(one).cursor
    two = app(story=sid)
    workspace(one).library.store = LoomStore(data_dir, busy_ms=50)  # a lock fails saves at once
    first = offer(one).result.suggestions[0].text
    holder = sqlite3.connect(LoomStore(data_dir).path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program holds the database
    accept(one, 0)
    accept(one, 0)  # a move at a node the store does not have yet
    assert not one.exception and "could not be saved" in storage_alarm(one)
    one.button(key="close").click().run()  # leaving would lose them: the tab stays
    assert not one.exception and story(one).startswith(FIRST + first)
    shown = story(one)
    holder.execute("ROLLBACK")
    holder.close()
    accept(two, 0)  # the other tab saves the same suggestion first
    assert not two.exception and story(two).startswith(FIRST + first)
    one.run()  # the next rerun saves the pending moves, onto the other tab's node
    assert not one.exception and not storage_alarm(one) and not notices(one)
    assert story(one) == shown and not workspace(one).pending
    stored = LoomStore(data_dir).load(sid)
    assert [n.text for n in stored.children(start)] == [first]
    assert workspace(one).cursor in stored.nodes and stored.text(workspace(one).cursor) == shown
    assert one.query_params["node"] == workspace(one).cursor
    two.run()
    accept(two, 0)
    one.run()
    accept(one, 1)
    assert not one.exception and not two.exception and not storage_alarm(one)
    for tab in (one, two):
        stored = LoomStore(data_dir).load(sid)
        assert workspace(tab).cursor in stored.nodes and not workspace(tab).pending


# -- the four page bugs of issue 10 ----------------------------------------------------------
def test_after_a_reload_mid_search_no_earlier_suggestions_are_shown_as_current(fake):
    at = started()  # bug (2): the story's last search came back for a later state
    before = suggestions(at)
    fake.down = True  # the edit is saved; its search never finishes
    at.text_area(key="story_text").set_value(FIRST + " ab").run()
    again = app(story=at.query_params["story"], node=at.query_params["node"])
    assert not again.exception and story(again) == FIRST + " ab"
    assert suggestions(again) == [] and "connection refused" in backend_error(again)
    fake.down = False
    again.button(key="again").click().run()
    assert suggestions(again) and suggestions(again) != before
    assert offer(again).node_id == workspace(again).cursor


def test_after_undo_the_stats_and_graphs_describe_this_nodes_search(fake):
    at = started()  # bug (3): the sidebar and downloads showed the last search anywhere
    start_stats, start_graph = sidebar_stats(at), token_tree(at)
    start = workspace(at).cursor
    accept(at, 0)
    assert sidebar_stats(at) != start_stats
    undo_to(at, start)
    assert sidebar_stats(at) == start_stats
    assert token_tree(at) == start_graph  # the graph its downloads draw
    assert offer(at).node_id == workspace(at).cursor


def test_a_double_accept_takes_one_suggestion(fake):
    at = started()  # bug (4): two ➡️ clicks before the page redrew appended both
    start = workspace(at).cursor
    first, second = offer(at).result.suggestions[:2]
    at.button(key=f"{rows(at)[0]}_go").click()
    at.button(key=f"{rows(at)[1]}_go").click()
    at.run()
    assert not at.exception
    path = workspace(at).loom.path()
    assert path[2].text == first.text and second.text not in story(at)
    # the second click keeps its suggestion as a branch where it was made: nothing lost
    assert {c.text for c in workspace(at).loom.children(start)} == {first.text, second.text}


def test_a_move_naming_another_storys_node_does_nothing(tmp_path):
    store = LoomStore(tmp_path)  # e.g. a button left on the page from the story open before
    first, second = session.Workspace(store), session.Workspace(store)
    assert first.start("ab") and second.start("ab ab")
    second.go(first.cursor)
    second.accept(Piece(first.cursor, " c", (), False, "m", {}, 0.0), None,
                  prefix_space=True)  # fmt: skip
    assert second.text == "ab ab" and not second.pending and second.save_error is None
    assert len(store.load(second.story_id).nodes) == 2  # the root and its one node


# -- nothing lost ---------------------------------------------------------------------------
def test_a_refreshed_tab_comes_back_to_the_same_node(fake):
    at = started()
    accept(at, 0)
    at.slider(key="cfg_max_depth").set_value(7).run()
    text, shown = story(at), suggestions(at)
    calls = len(fake.calls)
    again = app(story=at.query_params["story"], node=at.query_params["node"])
    assert not again.exception
    assert story(again) == text
    assert again.slider(key="cfg_max_depth").value == 7
    assert suggestions(again) == shown and len(fake.calls) == calls  # no search needed
    again.button(key="undo").click().run()
    assert story(again) == workspace(at).loom.text(workspace(at).loom.path()[-2].id)


def test_an_unknown_story_in_the_url_says_so(fake):
    at = app(story="no-such-story")
    assert not at.exception
    assert "no-such-story" in at.warning[0].value
    assert at.button(key="start")


def test_stories_are_listed_reopened_renamed_and_new_ones_started(fake):
    at = started()
    first_id = at.query_params["story"]
    at.text_input(key=f"title_{first_id}").set_value("My fox tale").run()
    at.button(key="close").click().run()
    assert "story" not in at.query_params and "node" not in at.query_params
    assert at.button(key=f"open_{first_id}").label == "📖 My fox tale"
    at = started("ab ab")  # a second story, in a new session
    at.button(key="close").click().run()
    assert len([b for b in at.button if b.key.startswith("open_")]) == 2
    at.button(key=f"open_{first_id}").click().run()
    assert not at.exception and story(at) == FIRST and at.query_params["story"] == first_id


def test_delete_asks_first_and_keeps_the_story_until_purged(fake):
    at = started()
    sid = at.query_params["story"]
    at.button(key="close").click().run()
    at.button(key=f"delete_{sid}").click().run()
    assert "stays recoverable" in at.warning[0].value
    at.button(key=f"delete_no_{sid}").click().run()
    assert at.button(key=f"open_{sid}")
    at.button(key=f"delete_{sid}").click().run()
    at.button(key=f"delete_yes_{sid}").click().run()
    assert f"open_{sid}" not in [b.key for b in at.button]
    at.button(key=f"restore_{sid}").click().run()
    assert at.button(key=f"open_{sid}")
    at.button(key=f"delete_{sid}").click().run()
    at.button(key=f"delete_yes_{sid}").click().run()
    at.button(key=f"purge_{sid}").click().run()
    at.button(key=f"purge_yes_{sid}").click().run()
    assert not at.exception
    assert sid not in " ".join(b.key for b in at.button)
    gone = app(story=sid)
    assert gone.warning and gone.button(key="start")


def test_a_loom_exported_and_imported_is_the_same_tree(fake):
    at = started()
    start = workspace(at).cursor
    accept(at, 0)
    undo_to(at, start)
    accept(at, 1)
    undo_to(at, workspace(at).loom.path()[2].id)
    at.button(key="bookmark").click().run()
    at.slider(key="cfg_max_suggestions").set_value(7).run()
    assert "Loom .json" in {b.label for b in at.get("download_button")}
    ws = workspace(at)
    exported = ws.library.export(ws.story_id)
    fresh = app()
    fresh.file_uploader[0].set_value(("s.json", exported.encode(), "application/json")).run()
    assert not fresh.exception
    assert story(fresh) == story(at) and branch(fresh) == "branch 2 of 2"
    old, new = workspace(at).loom, workspace(fresh).loom
    assert [n.text for n in new.nodes.values()] == [n.text for n in old.nodes.values()]
    assert new.bookmarks == old.bookmarks
    assert fresh.slider(key="cfg_max_suggestions").value == 7
    assert suggestions(fresh) == suggestions(at)
    assert fresh.query_params["story"] != at.query_params["story"]  # a new story


@pytest.mark.parametrize(
    "content",
    [b"not json", b'{"format": "other"}', b'{"format": "lloom-session", "history": []}',
     b"\xff\xfe", b'{"format": "lloom-session", "history": [3]}'],
)  # fmt: skip
def test_a_bad_import_is_a_clear_message(fake, content):
    at = app()
    at.file_uploader[0].set_value(("bad.json", content, "application/json")).run()
    assert not at.exception
    assert "cannot be imported" in " ".join(e.value for e in at.error)
    assert at.button(key="start")


def test_an_import_with_bad_settings_falls_back(fake):
    node = dict.fromkeys(("token_ids", "model", "params", "score"), None)
    data = {
        "format": "lloom-loom", "version": 1, "title": None, "created": 0, "root": "r",
        "cursor": "b", "checkouts": {}, "bookmarks": [],
        "nodes": [{**node, "id": "r", "parent": None, "text": "", "kind": "typed", "created": 0},
                  {**node, "id": "a", "parent": "r", "text": "ab", "kind": "typed", "created": 0},
                  {**node, "id": "b", "parent": "a", "text": " c", "kind": "edited", "created": 0}],
        "settings": {"max_depth": "deep", "cutoff": 7, "score": "nonsense"},
        "suggestions": {"b": {"params": {}, "tree": "nope"}},
    }  # fmt: skip
    at = app()
    blob = json.dumps(data).encode()
    at.file_uploader[0].set_value(("odd.json", blob, "application/json")).run()
    assert not at.exception
    assert story(at) == "ab c"
    assert [n.text for n in workspace(at).loom.path()] == ["", "ab", " c"]
    assert at.slider(key="cfg_cutoff").value == pytest.approx(0.05)  # out of bounds: default
    assert at.selectbox(key="cfg_rule").value == "relative"  # no knob kept: no rule implied
    assert at.slider(key="cfg_max_depth").value == 12  # unusable: the default
    [notice] = [w.value.replace("\\", "") for w in at.warning if "saved" in w.value]
    assert "cutoff = 7" in notice and "max_depth = 'deep'" in notice  # named, not clamped
    assert suggestions(at)  # searched afresh


def test_a_restarted_app_lists_the_saved_stories(fake, data_dir):
    at = started()
    accept(at, 0)
    text, sid = story(at), at.query_params["story"]
    st.cache_resource.clear()  # as after a restart: the store is opened afresh from disk
    again = app()
    assert not again.exception
    [entry] = [b for b in again.button if b.key == f"open_{sid}"]
    assert entry.label == f"📖 {FIRST}"
    assert any(" nodes · edited " in c.value for c in again.caption)
    entry.click().run()
    assert story(again) == text
    assert (data_dir / "stories.sqlite3").exists()
    assert f"saved in `{data_dir}`" in " ".join(c.value for c in again.sidebar.caption)


def storage_alarm(at: AppTest) -> str:
    return " ".join(e.value for e in at.error if e.icon == "💾")


def test_a_corrupt_database_is_left_alone_and_the_page_works_unsaved(fake, data_dir):
    garbage = b"this is not SQLite " * 100
    (data_dir / "stories.sqlite3").write_bytes(garbage)
    at = started()
    assert not at.exception
    assert "temporary folder, not your data folder" in storage_alarm(at)
    assert "not a LLooM database" in storage_alarm(at)
    assert story(at) == FIRST and suggestions(at)
    accept(at, 0)
    assert not at.exception
    assert (data_dir / "stories.sqlite3").read_bytes() == garbage


def test_a_damaged_story_entry_is_a_message_not_a_crash(fake, data_dir):
    at = started()
    sid = at.query_params["story"]
    with sqlite3.connect(data_dir / "stories.sqlite3") as db:
        db.execute("UPDATE stories SET settings = '{broken' WHERE id = ?", (sid,))
    again = app(story=sid)
    assert not again.exception
    assert "cannot be read" in storage_alarm(again)
    assert not again.warning  # not 'no such story': it is there, and damaged
    assert story(again) == FIRST  # its tree is intact: it opens, with default settings


def test_an_unusable_data_folder_means_a_temporary_one_and_says_so(fake, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LLOOM_DATA_DIR", str(blocker / "data"))
    at = started()
    assert not at.exception
    assert "cannot create the data folder" in storage_alarm(at)
    assert story(at) == FIRST and suggestions(at)
    assert "lloom-unsaved-" in " ".join(c.value for c in at.sidebar.caption)


def test_a_locked_database_keeps_the_moves_and_saves_them_once_free(tmp_path):
    store = LoomStore(tmp_path, busy_ms=200)
    ws = session.Workspace(store)
    assert ws.start("ab")
    lock = sqlite3.connect(store.path, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    ws.edit("ab ab")
    assert "locked" in ws.save_error and ws.text == "ab ab" and ws.pending
    shown = ws.cursor
    ws.refresh()  # a rerun while still locked: the move stays, and is shown
    assert ws.text == "ab ab" and ws.cursor == shown
    lock.execute("ROLLBACK")
    lock.close()
    ws.edit("ab ab c")
    assert ws.save_error is None and not ws.pending
    stored = store.load(ws.story_id)
    assert stored.text() == "ab ab c" and stored.node(shown).text == " ab"  # ids as shown


# -- bad input ------------------------------------------------------------------------------
def test_an_imported_loom_with_ids_outside_the_vocabulary_opens_and_searches(data_dir):
    at = app()  # the real embedded model: such an id crashed the whole server (issue 27)
    loom = json.dumps(oov_loom([1_000_000, 2**31 - 1])).encode()
    at.file_uploader[0].set_value(("oov.json", loom, "application/json")).run()
    assert not at.exception and not backend_error(at)
    assert story(at) == "Once upon a time, there was" and suggestions(at)
    again = app(story=at.query_params["story"], node=workspace(at).cursor)  # reopened by URL
    assert not again.exception and not backend_error(again)
    assert story(again) == "Once upon a time, there was" and suggestions(again)


def test_a_hundred_thousand_character_story_works(fake):
    long = ("a b c. " * 15_000)[:99_994] + " a bc."  # ends at a stop: not healed
    at = started(long)
    assert not at.exception and not backend_error(at)
    assert story(at) == long
    assert suggestions(at)
    at.text_area(key="story_text").set_value(long + " x").run()
    assert not at.exception and story(at) == long + " x"


def test_the_status_tells_how_far_a_long_story_has_been_read():
    from weave.search.beams import Progress

    reading = Progress(0, 0, 0, 512, 3.0, "", story_read=512, story_tokens=30_000)
    assert messages.live_status(reading) == "Reading the story… 512 of 30,000 tokens"
    weaving = Progress(2, 1, 3, 40, 3.5, " the king")
    assert messages.live_status(weaving).startswith("Weaving… depth 2, 1 found, 3 growing")


ODD = 'Emoji 👩‍👩‍👧, e\u0301, עברית, NUL \x00, $x$ *y* quote " back \\ <b>&amp;</b>'


def test_odd_characters_in_the_story_work(fake):
    at = started(ODD)
    assert not at.exception and not backend_error(at)
    assert story(at) == ODD
    assert suggestions(at) and len(graphs(at)) == 1
    assert ">&lt;b&gt;&amp;amp;&lt;/b&gt;</text>" in token_tree(at)  # the tail, as text
    assert "Emoji 👩‍👩‍👧" in story_tree(at)  # its opening words label its node


def test_a_lone_surrogate_is_replaced_not_a_crash(tmp_path):
    # a browser cannot send one (widget values are UTF-8); an imported file can
    ws = session.Workspace(LoomStore(tmp_path))
    ws.start("broken \ud800 text")
    assert ws.text == "broken \ufffd text"
    ws.edit("again \udfff")
    assert ws.text == "again \ufffd"


# -- bad data: a server answering badly, NaN in a saved or imported search ----------------
def notices(at) -> str:
    return " ".join(w.value for w in at.warning)


@pytest.mark.parametrize(
    "mode, said",
    [("nan", "finite log-probability"), ("drip", "too slow"), ("positive", "at most 0"),
     ("huge_logprob", "a number a float holds"), ("deep", "nested over")],
)  # fmt: skip
def test_a_server_answering_badly_is_one_clear_message(data_dir, monkeypatch, mode, said):
    with hostile_server("llamacpp", mode) as url:
        monkeypatch.setenv("LLAMA_API_URL", url)
        monkeypatch.setenv("LLAMA_TIMEOUT", "1")
        at = started()
    assert not at.exception
    assert story(at) == FIRST
    error = backend_error(at)
    assert said in error and url in error


def nan_search(data_dir, story_id: str, node_id: str) -> None:
    """Put NaN into a node's saved search, as a version that let NaN through saved it."""
    with sqlite3.connect(data_dir / "stories.sqlite3") as db:
        where = "WHERE story_id = ? AND node = ?"
        (data,) = db.execute(
            f"SELECT data FROM suggestions {where}", (story_id, node_id)
        ).fetchone()
        search = json.loads(data)
        search["suggestions"][0]["probability"] = math.nan
        db.execute(
            f"UPDATE suggestions SET data = ? {where}", (json.dumps(search), story_id, node_id)
        )


def test_a_stored_search_holding_nan_is_ignored_with_a_message(fake, data_dir):
    at = started()
    sid, node = at.query_params["story"], workspace(at).cursor
    nan_search(data_dir, sid, node)
    again = app(story=sid, node=node)  # reopened: the page used to crash here, every time
    assert not again.exception
    assert "not a finite number" in notices(again)
    assert story(again) == FIRST and suggestions(again)  # searched afresh
    accept(again, 0)
    assert not again.exception and not notices(again)  # the message was about that node


def test_an_imported_search_holding_nan_is_ignored_with_a_message(fake):
    at = started()
    ws = workspace(at)
    exported = json.loads(ws.library.export(ws.story_id))
    [search] = exported["suggestions"].values()
    search["tree"]["children"][0]["logprob"] = math.inf
    exported["settings"]["cutoff"] = math.nan  # not JSON: the story's own defaults instead
    fresh = app()
    blob = json.dumps(exported).encode()
    fresh.file_uploader[0].set_value(("nan.json", blob, "application/json")).run()
    assert not fresh.exception
    assert "not a finite number" in notices(fresh)
    assert story(fresh) == FIRST and suggestions(fresh)


class GgufNamed(StoryFake):
    """The fake model, named as llama-server names the embedded model."""

    @property
    def model_name(self) -> str:
        return "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def smollm2_section(tmp_path, monkeypatch) -> None:
    """config.toml with a section of the embedded model's own (cutoff 0.1)."""
    config = tmp_path / "config.toml"
    shipped = (Path(lloom.__file__).parent / "config.toml").read_text()
    config.write_text(shipped + '\n[models."SmolLM2-135M-Instruct"]\ncutoff = 0.1\n')
    monkeypatch.setenv("LLOOM_CONFIG", str(config))


def test_the_model_section_applies_to_a_gguf_name_and_the_page_says_which(
    data_dir, monkeypatch, smollm2_section
):
    monkeypatch.setattr(backends, "create_backend", lambda settings: GgufNamed(seed=1))
    at = started()
    assert not at.exception
    assert at.slider(key="cfg_cutoff").value == pytest.approx(0.1)  # not [search]'s 0.05
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert '[models."SmolLM2-135M-Instruct"]' in captions


class Renamed(StoryFake):
    """The fake model, under whatever name a test gives it (another model loaded)."""

    name_now = "fake-model"

    @property
    def model_name(self) -> str:
        return self.name_now


def test_a_story_continued_with_another_model_takes_its_section_but_the_writers_values(
    data_dir, monkeypatch, smollm2_section
):
    backend = Renamed(seed=1)
    monkeypatch.setattr(backends, "create_backend", lambda settings: backend)
    at = started()
    assert at.slider(key="cfg_cutoff").value == pytest.approx(0.05)  # [search]'s
    at.slider(key="cfg_max_depth").set_value(7).run()  # the writer's own
    assert "cutoff" not in workspace(at).settings.record  # the model's default: not the writer's
    backend.name_now = "SmolLM2-135M-Instruct"  # [models."SmolLM2-135M-Instruct"] cutoff 0.1
    at.run()
    assert not at.exception
    assert at.slider(key="cfg_cutoff").value == pytest.approx(0.1)
    assert at.slider(key="cfg_max_depth").value == 7
    assert offer(at).params.cutoff == pytest.approx(0.1) and offer(at).params.max_depth == 7
    again = app(story=at.query_params["story"])  # reopened under the new model: the same
    assert again.slider(key="cfg_cutoff").value == pytest.approx(0.1)
    assert again.slider(key="cfg_max_depth").value == 7


# -- a page a writer enjoys (issue 14) --------------------------------------------------------
def bars(at: AppTest) -> list[str]:
    """Each row's share, the figure over its bar."""
    return [re.search(r'class="share"[^>]*>([^<]+%)<', row).group(1) for row in shaded(at)]


def test_one_row_per_suggestion_editable_in_place(fake):
    at = started()
    ranked = offer(at).result.suggestions
    listed = min(len(ranked), LISTED)
    assert len(shaded(at)) == len(rows(at)) == len(bars(at)) == listed >= 5
    assert all("background-color" in row for row in shaded(at))  # shaded by probability
    assert not [box for box in at.text_input if box.key.startswith("sg_")]  # no second copy
    box = edit_box(at, 2)  # ✏️: that row's text becomes a box, in its place
    assert box.value == present.editable_text(ranked[2].text.removeprefix(" "))
    assert len(shaded(at)) == listed - 1 and len(rows(at)) == len(bars(at)) + 1 == listed
    assert [b.key for b in at.text_input if b.key.startswith("sg_")] == [rows(at)[2]]
    assert "Enter takes it" in box.help
    at.button(key=f"{rows(at)[2]}_close").click().run()  # ✕: shaded again, nothing taken
    assert len(shaded(at)) == listed and "sg_" not in str([b.key for b in at.text_input])
    assert workspace(at).loom.children(workspace(at).cursor) == []


def test_the_first_rows_are_listed_until_the_writer_asks_for_all(fake):
    at = started()
    ranked = offer(at).result.suggestions
    assert len(ranked) > LISTED  # the fake offers more than a screen of them
    assert len(rows(at)) == LISTED and not at.button(key="rows_more").disabled
    assert at.button(key="rows_more").label == f"▾ {len(ranked) - LISTED} more"
    at.button(key="rows_more").click().run()
    assert len(rows(at)) == len(bars(at)) == len(ranked)  # every one, in rank order
    assert bars(at) == [present.share_html(s) for s in present.bar_shares(ranked, "words")]
    accept(at, len(ranked) - 1)  # the last one can be taken, and the next node lists all too
    assert workspace(at).loom.path()[2].text == ranked[-1].text
    assert len(rows(at)) == len(offer(at).result.suggestions)
    at.button(key="rows_fewer").click().run()
    assert len(rows(at)) == min(len(offer(at).result.suggestions), LISTED)


def lookalike_table(context: tuple[str, ...]) -> dict[str, float]:
    """After the story's ',': ' a.', 'a.' and 'b.', two alike but for their leading space."""
    if context[-1] == ",":
        return {" ": 0.3, "a": 0.3, "b": 0.3}
    return {"a": 0.95} if context[-1] == " " else {".": 0.95}


def test_suggestions_alike_but_for_a_leading_space_are_one_row(data_dir, monkeypatch):
    lookalike = StoryFake(table=lookalike_table)
    monkeypatch.setattr(backends, "create_backend", lambda settings: lookalike)
    at = started()
    assert sorted(suggestions(at)) == ["a.", "b."]  # " a." and "a." pooled, as v0.3 did
    pooled = next(s for s in offer(at).result.suggestions if s.text.endswith("a."))
    assert pooled.probability == pytest.approx(0.3 * 0.95 * 0.95 + 0.3 * 0.95)  # both beams
    at.checkbox(key="cfg_prefix_space").uncheck().run()  # pooled all the same
    assert sorted(suggestions(at)) == ["a.", "b."]


@pytest.mark.parametrize("score", ["words", "joint", "lloom"])
def test_bars_show_each_suggestions_share_of_the_ranking_score(fake, score):
    at = started()
    at.radio(key="cfg_score").set_value(score).run()
    ranked = offer(at).result.suggestions
    shares = present.bar_shares(ranked, score)
    assert bars(at) == [present.share_html(share) for share in shares][:LISTED]
    assert not {"0%", "0.0%"} & set(bars(at))  # every listed row's figure reads as something
    assert shares[0] == max(shares)  # the best row first, then each opening's best
    assert_openings_first(ranked)
    assert any(messages.bar_caption(score) in c.value for c in at.caption)


def test_few_suggestions_bring_the_hint_with_the_numbers(fake):
    at = started()
    at.slider(key="cfg_cutoff").set_value(0.9).run()
    assert len(rows(at)) < 5
    hint = " ".join(c.value for c in at.caption if c.value.startswith("💡"))
    assert "at cutoff 0.9" in hint and "lower the cutoff" in hint


def labelled(label: str) -> bool:
    """A button label with a word in it (an emoji or arrow may decorate it)."""
    return re.search(r"[A-Za-z]{2,}", label) is not None


def test_every_button_has_words(fake):
    at = started()
    keep(at, 1)
    at.button(key="bookmark").click().run()
    assert all(labelled(b.label) for b in at.button)  # ➜ Take: the arrow and a word
    assert any(box.value == FIRST for box in at.sidebar.text_input)  # the title, to rename
    at.button(key="close").click().run()
    assert at.button and all(labelled(b.label) for b in at.button)  # the start page's too


def test_the_start_page_says_first_that_the_model_cannot_be_used(data_dir, monkeypatch):
    def broken(settings):
        raise BackendError("connection refused", backend="fake", url="http://127.0.0.1:9")

    monkeypatch.setattr(backends, "create_backend", broken)
    at = app()
    assert not at.exception
    [error] = [e for e in at.error if e.icon == "🔌"]
    assert "cannot be used" in error.value and "saved stories" in error.value
    assert "Your story is kept" not in error.value  # there is no story yet
    elements = list(at.main)
    assert elements.index(error) < elements.index(at.radio(key="start_choice"))


@pytest.mark.slow
def test_a_search_answered_from_the_cache_says_so(data_dir):
    at = started()  # the real embedded model: its fragment tree keeps every answer
    fewer = at.slider(key="cfg_max_suggestions").value - 1
    at.slider(key="cfg_max_suggestions").set_value(fewer).run()  # the same tree: no forward
    assert not at.exception
    assert "from cache, 0.0 s · " in status_line(at)  # not "0 tokens/s"
    assert offer(at).result.stats.forward_calls == 0
    sidebar = " ".join(c.value for c in at.sidebar.caption)
    assert "No forward calls: every answer came from the cache" in sidebar


@pytest.mark.slow
def test_alternatives_at_a_token_branch_the_story_there(data_dir):
    at = started()  # the real embedded model gives the story's own tokens' log-probs
    start, text = workspace(at).cursor, story(at)
    at.button(key="alt_show").click().run()
    assert not at.exception
    tokens = " ".join(m.value for m in at.markdown if "title=" in m.value)
    assert "upon" in tokens and "background-color" in tokens  # shaded, with tooltips
    rows_shown = at.session_state["page"].alternatives.rows
    last = rows_shown[-1]
    assert outlined(at) == last.position  # the last token picked until a click
    assert len(choices(at, last.position)) == len(last.top)
    upon = next(row for row in rows_shown if row.text == " upon")
    at.text_input(key="alt_pick").set_value(str(upon.position)).run()  # its click's post
    assert outlined(at) == upon.position and not choices(at, last.position)
    buttons = choices(at, upon.position)
    assert [b.disabled for b in buttons] == [c.token_id == upon.token_id for c in upon.top]
    pick, choice = next((j, c) for j, c in enumerate(upon.top) if c.text != " upon")
    assert buttons[pick].label == present.alternative_label(choice)  # "␣tall 20.1%"
    buttons[pick].click().run()
    assert not at.exception
    assert story(at).startswith("Once" + choice.text)  # up to that token, then the choice
    loom = workspace(at).loom
    assert loom.text(start) == text and start in loom.nodes  # the old path kept, a branch


def outlined(at) -> int:
    """The position of the story token the Alternatives dialog shows picked."""
    html = next(m.value for m in at.markdown if 'data-lloom-box="alt_pick"' in m.value)
    return int(re.search(r'data-lloom-at="(\d+)" tabindex="0"', html).group(1))


def choices(at, position: int) -> list:
    """The buttons of the alternatives at the story token at `position`, in order."""
    return [b for b in at.button if b.key and b.key.startswith(f"alt_{position}_")]


def test_whitespace_alone_is_no_row_and_a_whitespace_variant_is_the_same_row(data_dir, monkeypatch):
    spaces = StoryFake(table=lambda context: {" ": 0.5, "a": 0.45})
    monkeypatch.setattr(backends, "create_backend", lambda settings: spaces)
    at = started()
    at.slider(key="cfg_max_depth").set_value(1).run()  # " " alone goes on to a word
    [row] = offer(at).result.suggestions  # " a" and "  a" read alike: one row
    assert row.text.strip() == "a" and [v.strip() for v in row.variants] == ["a"]
    assert len(shaded(at)) == 1
    accept(at, 0)
    assert workspace(at).loom.path()[2].text.strip() == "a"


@pytest.mark.parametrize("flavour", ["llamacpp", "vllm", "openai"])
@pytest.mark.parametrize("mode", ["huge_logprob", "deep"])
def test_sample_on_a_server_answering_badly_is_one_clear_message(
    data_dir, monkeypatch, flavour, mode
):
    """🎲 Sample raised OverflowError / RecursionError from these replies (issue 27),
    which the page did not catch: now the one model message, the story as it was."""
    said = {"huge_logprob": "expected a number a float holds", "deep": "nested over"}[mode]
    with hostile_server(flavour, mode) as url:
        for key, value in {"LLOOM_BACKEND": flavour, "LLAMA_API_URL": url, "VLLM_API_URL": url,
                           "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "sk-test-0123456",
                           "OPENAI_MODEL": "hostile"}.items():  # fmt: skip
            monkeypatch.setenv(key, value)
        at = started()  # the search fails too (its message is tested above)
        assert not at.button(key="sample").disabled
        at.button(key="sample").click().run()
        assert not at.exception and story(at) == FIRST
        [error] = [e.value for e in at.error if e.icon == "🔌"]
        [line] = [line for line in error.splitlines() if f"{flavour} at {url}" in line]
        assert said in line and "Traceback" not in error
        assert workspace(at).offers.draw(workspace(at).cursor) is None


@pytest.mark.parametrize("flavour", ["llamacpp", "vllm", "openai"])
def test_a_password_in_the_server_url_is_not_on_the_page(data_dir, monkeypatch, flavour):
    """Issue 31: Details printed the server URL with its password to every writer."""
    with hostile_server(flavour) as url:
        with_password = url.replace("://", "://probeuser:hunterPASSWORD2@")
        env = {"LLOOM_BACKEND": flavour, "LLAMA_API_URL": with_password,
               "VLLM_API_URL": with_password, "OPENAI_BASE_URL": f"{with_password}/v1",
               "OPENAI_API_KEY": "sk-test-0123456", "OPENAI_MODEL": "hostile"}  # fmt: skip
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        at = started()
    shown = [e.value for kind in (at.caption, at.markdown, at.error, at.info, at.warning)
             for e in kind]  # fmt: skip
    assert any("probeuser:[redacted]@" in text for text in shown)  # Details' "Server:"
    assert not any("hunterPASSWORD2" in text for text in shown)


def test_a_story_with_a_parent_cycle_opened_by_url_is_one_message(fake, data_dir):
    """Issue 27: a database another program wrote with a parent cycle raised on open."""
    at = started()
    sid, good = at.query_params["story"], workspace(at).cursor
    accept(at, 0)
    first, second = (n.id for n in workspace(at).loom.path()[1:3])
    with sqlite3.connect(LoomStore(data_dir).path) as db:
        db.execute("DROP TRIGGER nodes_stay")
        db.execute("UPDATE nodes SET parent = ? WHERE id = ?", (second, first))
    for query in ({"story": sid}, {"story": sid, "node": good}):
        again = app(**query)
        assert not again.exception
        [error] = [e.value for e in again.error]
        assert f"story {sid} cannot be read" in error and first in error
        assert "could not be read" in error and "could not be saved" not in error
