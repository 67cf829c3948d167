"""Other loom tools' files into the store, and Open Loom v2 out: `weave.interop`.

Each format is imported from a fixture made here in the shape its tool writes (the real
files from those tools' repositories were tried by hand; they are others' writing and stay
out of the repo), through the real store, and checked for every node's text, the tree's
shape, the cursor, the bookmarks and what was kept aside.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from weave.interop.files import export_openloom, import_file
from weave.interop.foreign import IMPORTED_KEY, node_notes
from weave.loom.loom import Loom
from weave.loom.store import BadImport, LoomStore
from weave.story.steering import steering_in
from weave.view.loom_view import story_tree


def imported(tmp_path, doc, **how) -> tuple[Loom, LoomStore, str, str]:
    """Import `doc` into a fresh store: (its loom, the store, its id, the message)."""
    store = LoomStore(tmp_path)
    data = doc if isinstance(doc, str | bytes) else json.dumps(doc)
    story_id, read = import_file(store, data, **how)
    return store.load(story_id), store, story_id, read.message()


def texts_by_id(loom: Loom) -> dict[str, str]:
    """Every node's whole story, by node id (the empty root left out)."""
    return {n: loom.text(n) for n in loom.nodes if n != loom.root}


def shape(loom: Loom) -> dict[str, list[str]]:
    """Each node's children, in order, by id."""
    return {n: [c.id for c in loom.children(n)] for n in loom.nodes}


# -- each format --------------------------------------------------------------------------
SOCKETTEER = {
    "root": {
        "text": "The rain", "id": "r", "mutable": False, "visited": True,
        "meta": {"source": "prompt", "creation_timestamp": "2021-09-18T12:00:00"},
        "children": [
            {"id": "a", "text": " fell.", "children": [], "parent_id": "r", "tags": ["bookmark"],
             "meta": {"source": "AI", "generation": {"id": "g1", "index": 0}},
             "text_attributes": {"child_preview": "fell"}},
            {"id": "b", "text": " rose", "parent_id": "r", "chapter_id": "c1",
             "meta": {"source": "mixed"},
             "children": [{"id": "c", "text": " upward.", "children": [], "open": 0}]},
        ],
    },
    "chapters": {"c1": {"title": "Rising", "root_id": "b"}},
    "canonical": ["r", "b", "c"], "memories": {}, "summaries": {},
    "model_responses": {"g1": {"model": "davinci", "prompt": "The rain"}},
    "selected_node_id": "c",
}  # fmt: skip


def test_a_socketteer_loom_keeps_its_texts_shape_cursor_bookmarks_and_chapters(tmp_path):
    loom, store, story_id, said = imported(tmp_path, SOCKETTEER)
    assert texts_by_id(loom) == {"r": "The rain", "a": "The rain fell.", "b": "The rain rose",
                                 "c": "The rain rose upward."}  # fmt: skip
    assert [c.id for c in loom.children("r")] == ["a", "b"] and loom.cursor == "c"
    assert loom.bookmarks == {"a"}
    assert said.startswith("Imported from socketteer loom.") and "chapters" in said
    kept = store.settings(story_id)[IMPORTED_KEY]
    assert kept["extensions"]["socketteer-loom"]["chapters"] == SOCKETTEER["chapters"]
    assert kept["nodes"]["a"]["extensions"]["socketteer-loom"]["text_attributes"]
    made = loom.node("a").provenance
    assert (made.how, made.source, made.author, made.model) == (
        "imported", "socketteer loom", "model", "davinci")  # fmt: skip
    assert loom.node("b").kind == "edited" and loom.node("r").kind == "typed"


def test_a_bare_socketteer_node_list_is_several_roots_under_an_empty_one(tmp_path):
    loom, *_ = imported(tmp_path, [{"text": "One", "children": []},
                                   {"text": "Two", "children": []}])  # fmt: skip
    assert loom.node(loom.root).text == "" and [c.text for c in loom.children(loom.root)] == [
        "One",
        "Two",
    ]


def test_an_open_loom_v1_tree_keeps_order_authors_times_and_bookmark_labels(tmp_path):
    doc = {
        "id": "t", "title": "Marie", "rootNodeId": "n1", "currentNodeId": "n3",
        "bookmarkedNodes": {"n3": "n3"},
        "nodes": {
            "n3": {"id": "n3", "text": " sang.", "author": "assistant", "modelId": "gpt-4",
                   "createdTime": 700000000.5, "parentId": "n1", "childrenIds": [],
                   "isBookmarked": True, "bookmarkTitle": "the song"},
            "n1": {"id": "n1", "text": "Marie", "author": "user", "parentId": None,
                   "childrenIds": ["n2", "n3"], "createdTime": 700000000},
            "n2": {"id": "n2", "text": " wept.", "author": "assistant", "parentId": "n1",
                   "childrenIds": []},
        },
    }  # fmt: skip
    loom, store, story_id, said = imported(tmp_path, doc)
    assert said == "Imported from Open Loom v1." and store.info(story_id).title == "Marie"
    assert [c.id for c in loom.children("n1")] == ["n2", "n3"]  # childrenIds' order, not the map's
    assert loom.text("n3") == "Marie sang." and loom.cursor == "n3" and loom.bookmarks == {"n3"}
    assert loom.node("n1").created == 700000000 + 978307200  # Swift's 2001 epoch
    assert loom.node("n3").provenance.model == "gpt-4"
    node = store.settings(story_id)[IMPORTED_KEY]["nodes"]["n3"]
    assert node["meta"] == {"bookmarkLabel": "the song"}


def test_a_loomsidian_note_keeps_its_tree_current_node_and_ui_state(tmp_path):
    note = {
        "current": "k2", "hoisted": ["k0"], "searchTerm": "", "generating": None,
        "nodes": {
            "k0": {"text": "Dear diary,", "parentId": None, "collapsed": False, "unread": False,
                   "bookmarked": False, "searchResultState": None},
            "k1": {"text": " today", "parentId": "k0", "collapsed": True, "unread": True,
                   "bookmarked": True, "lastVisited": 1700000000000, "searchResultState": None},
            "k2": {"text": " I flew.", "parentId": "k1", "collapsed": False, "unread": False,
                   "bookmarked": False, "searchResultState": None},
        },
    }  # fmt: skip
    loom, store, story_id, said = imported(tmp_path, note)
    assert said == "Imported from Loomsidian." and loom.text() == "Dear diary, today I flew."
    assert loom.bookmarks == {"k1"} and loom.node("k1").provenance.author == "mixed"
    kept = store.settings(story_id)[IMPORTED_KEY]
    assert kept["nodes"]["k1"]["extensions"]["loomsidian"]["collapsed"] is True
    assert kept["extensions"]["loomsidian"]["hoisted"] == ["k0"]
    plugin = {"settings": {"modelPresets": [{"apiKey": "sk-secret"}]},
              "state": {"a.md": note, "b.md": note}}  # fmt: skip
    loom, store, story_id, said = imported(tmp_path / "plugin", plugin)
    assert "1 other note(s)" in said and "API keys" in said
    assert "sk-secret" not in json.dumps(store.settings(story_id)) and loom.text().endswith("flew.")


def test_an_exoloom_tree_keeps_children_order_bookmarks_and_pruned_nodes(tmp_path):
    doc = {
        "tree": {"rootNodeId": "x0", "nodes": {
            "x2": {"content": " east.", "parentId": "x0", "childrenIds": []},
            "x0": {"content": "Go", "parentId": None, "childrenIds": ["x1", "x2"]},
            "x1": {"content": " west.", "parentId": "x0", "childrenIds": [], "role": "model"},
        }},
        "lens": {"bookmarks": [{"nodeId": "x2", "label": "east"}], "prunedNodes": ["x1"],
                 "zoom": 2},
    }  # fmt: skip
    loom, store, story_id, said = imported(tmp_path, doc)
    assert said == "Imported from ExoLoom." and [c.id for c in loom.children("x0")] == ["x1", "x2"]
    assert loom.bookmarks == {"x2"} and loom.text("x1") == "Go west."
    kept = store.settings(story_id)[IMPORTED_KEY]
    assert kept["nodes"]["x1"]["meta"] == {"pruned": True}
    assert kept["nodes"]["x2"]["meta"] == {"bookmarkLabel": "east"}
    assert kept["extensions"]["exoloom"]["lens"] == {"zoom": 2}
    tooltips = story_tree(loom, story_id, node_notes(store.settings(story_id))).source
    assert "from ExoLoom · 🔖 east" in tooltips  # the label shows on hover


def _patch(start: int, *diffs) -> dict:
    """One diff-match-patch patch as MiniLoom saves it (a JS Diff object as JSON)."""
    before = sum(len(t) for op, t in diffs if op <= 0)
    after = sum(len(t) for op, t in diffs if op >= 0)
    return {"diffs": [{"0": op, "1": t} for op, t in diffs], "start1": start, "start2": start,
            "length1": before, "length2": after}  # fmt: skip


MINILOOM = {
    "loomTree": {"nodeStore": {
        "1": {"id": "1", "type": "root", "patch": "", "parent": None, "children": ["2"],
              "timestamp": 1700000000000, "summary": "Root Node", "rating": None, "read": True},
        "2": {"id": "2", "type": "user", "patch": [_patch(0, (1, "Once upon"))], "parent": "1",
              "children": ["3", "4"], "timestamp": 1700000001000, "summary": "Start",
              "rating": None, "read": True},
        "3": {"id": "3", "type": "gen", "patch": [_patch(5, (0, "upon"), (1, " a time"))],
              "parent": "2", "children": [], "model": "llama", "rating": True, "read": False,
              "summary": "A time", "timestamp": 1700000002000, "finishReason": "length"},
        "4": {"id": "4", "type": "rewrite",
              "patch": [_patch(0, (-1, "Once"), (1, "Twice"), (0, " upo"))], "parent": "2",
              "children": [], "rating": False, "timestamp": 1700000003000},
    }},
    "focus": {"id": "3", "type": "gen", "cachedRenderText": "ignored"},
}  # fmt: skip


def test_a_miniloom_file_materializes_its_patches_and_branches_a_rewrite(tmp_path):
    loom, store, story_id, said = imported(tmp_path, MINILOOM)
    assert loom.text("3") == "Once upon a time" and loom.text("4") == "Twice upon"
    assert loom.node("3").text == " a time" and loom.cursor == "3"
    assert loom.node("4").parent == "1"  # a rewrite branches where its text departs
    assert "1 rewrite(s)" in said
    kept = store.settings(story_id)[IMPORTED_KEY]["nodes"]
    assert (
        kept["3"]["meta"] == {"rating": 1, "note": "A time"} and kept["4"]["meta"]["rating"] == -1
    )
    assert kept["4"]["extensions"]["miniloom"]["parent"] == "2"
    assert node_notes(store.settings(story_id))["3"] == "rated +1 · A time"
    assert loom.node("3").provenance.model == "llama" and loom.node("3").created == 1700000002.0


def test_a_miniloom_patch_that_does_not_apply_is_one_line(tmp_path):
    doc = json.loads(json.dumps(MINILOOM))
    doc["loomTree"]["nodeStore"]["3"]["patch"] = [_patch(5, (0, "UPON"), (1, "!"))]
    with pytest.raises(BadImport, match="node '3': patch 0 does not apply to its parent's text"):
        imported(tmp_path, doc)


def test_a_basemode_export_keeps_its_checked_out_path_and_context_nodes(tmp_path):
    row = {"tree_id": "t", "context_id": None, "strategy": None, "max_tokens": None,
           "temperature": None, "created_at": "2026-01-02T03:04:05.000006Z",
           "metadata": {}}  # fmt: skip
    doc = {"version": 1, "nodes": [
        {**row, "id": "ctx", "parent_id": None, "kind": "context", "text": "You write noir.",
         "model": None, "checked_out": False},
        {**row, "id": "p", "parent_id": None, "kind": "root", "text": "Night.", "model": None,
         "checked_out": False},
        {**row, "id": "q", "parent_id": "p", "kind": "text", "text": " Rain.", "model": "gpt2",
         "strategy": "sample", "max_tokens": 20, "temperature": 0.9, "checked_out": False},
        {**row, "id": "s", "parent_id": "p", "kind": "text", "text": " Smoke.", "model": "gpt2",
         "checked_out": True, "metadata": {"bookmarked": True, "rating": 2}},
    ]}  # fmt: skip
    loom, store, story_id, said = imported(tmp_path, doc)
    assert said == ("Imported from basemode-loom. Kept with the story but not shown here: "
                    "1 context node(s).")  # fmt: skip
    assert loom.cursor == "s" and loom.text() == "Night. Smoke." and loom.bookmarks == {"s"}
    assert loom.node("q").provenance.model == "gpt2" and loom.node("p").kind == "typed"
    kept = store.settings(story_id)[IMPORTED_KEY]
    assert kept["nodes"]["q"]["generation"]["parameters"] == {
        "strategy": "sample",
        "max_tokens": 20,
        "temperature": 0.9,
    }
    assert kept["extensions"]["basemode-loom"]["contexts"][0]["text"] == "You write noir."


def test_a_mikupad_session_is_one_node_and_its_memory_note_and_world_info_steer(tmp_path):
    session = {
        "name": "Miku night", "prompt": [{"type": "user", "content": "The city hummed"},
                                         {"type": "model", "content": " softly."}],
        "memoryTokens": {"prefix": "", "text": "Miku is a singer.", "suffix": "",
                         "contextOrder": "{memText}{prompt}"},
        "authorNoteTokens": {"prefix": "[", "text": "Keep it gentle.", "suffix": "]"},
        "authorNoteDepth": 2, "seed": 42, "temperature": 0.7, "endpointAPIKey": "sk-secret",
        "worldInfo": {"mikuPediaVersion": 1, "prefix": "", "suffix": "", "entries": [
            {"displayName": "Tokyo", "text": "A vast city.", "keys": ["Tokyo", " "],
             "search": ""}]},
    }  # fmt: skip
    exported = {k: json.dumps(v) for k, v in session.items()}  # as mikupad's Export writes it
    loom, store, story_id, said = imported(tmp_path, exported)
    assert loom.text() == "The city hummed softly." and len(loom.nodes) == 2
    assert store.info(story_id).title == "Miku night" and "API key (not kept)" in said
    steering = steering_in(store.settings(story_id))
    assert (steering.memory, steering.note, steering.note_depth) == (
        "Miku is a singer.", "Keep it gentle.", 2)  # fmt: skip
    assert [(e.name, e.keys, e.text) for e in steering.lore] == [
        ("Tokyo", ("Tokyo",), "A vast city.")
    ]
    assert "sk-secret" not in json.dumps(store.settings(story_id))
    assert store.settings(story_id)[IMPORTED_KEY]["extensions"]["mikupad"]["seed"] == 42


def test_a_format_can_be_forced_and_a_wrong_one_says_so(tmp_path):
    loom, *_ = imported(tmp_path, SOCKETTEER, format="socketteer")
    assert loom.text("c") == "The rain rose upward."
    with pytest.raises(BadImport, match="a MiniLoom file with a missing or wrong value"):
        imported(tmp_path / "b", SOCKETTEER, format="miniloom")


# -- crafted bad files: one clear line each ---------------------------------------------
def _loomsidian(nodes: dict) -> dict:
    return {"current": next(iter(nodes)), "nodes": {
        k: {"text": t, "parentId": p} for k, (t, p) in nodes.items()}}  # fmt: skip


@pytest.mark.parametrize(
    "data, message",
    [
        (_loomsidian({"a": ("x", None), "b": ("y", "c"), "c": ("z", "b")}), "form a cycle"),
        (_loomsidian({"a": ("x", None), "b": ("y", "gone")}),
         "names a parent 'gone' the file does not hold (an orphan)"),
        ({"version": 1, "nodes": [{"id": "a", "parent_id": None, "text": "x"},
                                  {"id": "a", "parent_id": None, "text": "y"}]},
         "node id 'a' appears twice"),
        ('{"root": ' + '{"text": "", "children": [' * 50_000 + "]}" * 50_000 + "}",
         "nested deeper than 512 levels"),
        ('{"root": {"text": "x", "children": [], "n": 1e400}}', "a number too large for a float"),
        ('{"root": {"text": "x", "children": [], "n": 99999999999999999999999}}',
         "does not fit 64 bits"),
        ({"root": {"text": 7, "children": []}}, "node 'socketteer-1': text is not a string (int)"),
        ({"root": {"text": "x", "children": {"a": 1}}}, "children is not a list (dict)"),
        ({"format": "open-loom", "version": "3.0", "trees": []},
         "version '3.0'; this LLooM reads 2.x"),
        ({"format": "open-loom", "version": "2.0", "trees": [{"nodes": {}, "edges": []}]},
         "it holds no nodes"),
        ({"hello": "world"}, "not a LLooM file, nor another loom tool's it reads"),
    ],
)  # fmt: skip
def test_a_crafted_bad_file_is_one_line_naming_the_problem(tmp_path, data, message):
    store = LoomStore(tmp_path)
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(BadImport) as raised:
        import_file(store, text, "crafted.json")
    assert str(raised.value).startswith("crafted.json cannot be imported: ")
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert store.stories() == []


# -- Open Loom v2 --------------------------------------------------------------------------
ELSEWHERE = {
    "format": "open-loom", "version": "2.1", "exportedAt": "2026-07-08T21:14:00Z",
    "generator": {"name": "Aspen Grove", "version": "0.9.0"},
    "agents": {"agent-c": {"name": "Claude", "type": "model"}},
    "extensions": {"aspen-grove": {"grove": "g1"}},
    "trees": [
        {
            "id": "t1", "title": "Hello", "mode": "dialogue", "systemContext": "Be kind.",
            "rootNodeIds": ["a"], "currentNodeId": "c", "createdAt": "2026-06-30T10:00:00Z",
            "tags": [{"name": "research", "color": "#7A9E7E"}],
            "extensions": {"aspen-grove": {"summary": "greetings"}},
            "nodes": {
                "a": {"id": "a", "content": [{"type": "text", "text": "Once upon a time"}],
                      "author": {"role": "human"},
                      "extensions": {"aspen-grove": {"localId": "a7"}}},
                "b": {"id": "b", "content": [{"type": "text", "text": " there was a fox."},
                                             {"type": "image", "ref": "data:image/png;base64,AA==",
                                              "mimeType": "image/png"}],
                      "author": {"role": "model", "agentId": "agent-c"}, "editedFrom": "c",
                      "meta": {"bookmarked": True, "bookmarkLabel": "fox", "rating": 1,
                               "tags": ["research"], "note": "good"},
                      "generation": {"provider": "openrouter", "model": "claude", "latencyMs": 1830,
                                     "requestedAt": "2026-07-01T12:30:03Z",
                                     "contentHash": "sha256:9f2b", "usage": {"totalTokens": 9}}},
                "c": {"id": "c", "content": [{"type": "text", "text": " there was a loom."}],
                      "author": {"role": "mixed"}, "createdAt": "2026-07-01T12:31:00Z"},
            },
            "edges": [
                {"id": "e-b", "type": "continuation", "sources": [{"nodeId": "a"}],
                 "targetNodeId": "b", "extensions": {"aspen-grove": {"weight": 2}}},
                {"id": "e-c", "type": "continuation",
                 "sources": [{"nodeId": "a", "role": "primary"},
                             {"nodeId": "b", "role": "context"}],
                 "targetNodeId": "c"},
                {"id": "n-1", "type": "annotation", "sources": [{"nodeId": "c"}],
                 "targetNodeId": "b"},
            ],
        },
        {"id": "t2", "title": "Other", "rootNodeIds": [], "nodes": {}, "edges": []},
    ],
}  # fmt: skip


def test_an_open_loom_file_from_elsewhere_keeps_its_unknown_extensions_through_lloom(tmp_path):
    loom, store, story_id, said = imported(tmp_path, ELSEWHERE)
    assert loom.text("b") == "Once upon a time there was a fox." and loom.cursor == "c"
    assert loom.bookmarks == {"b"} and [c.id for c in loom.children("a")] == ["b", "c"]
    assert "1 more tree(s)" in said and "images or audio in 1 node(s)" in said
    made = loom.node("b").provenance
    assert (made.backend, made.model, made.latency_ms) == ("openrouter", "claude", 1830.0)
    again = json.loads(export_openloom(store, story_id))
    for key in ("agents", "extensions"):
        assert again[key] == ELSEWHERE[key]
    assert again["trees"][1] == ELSEWHERE["trees"][1]
    tree, source = again["trees"][0], ELSEWHERE["trees"][0]
    for key in ("mode", "systemContext", "tags", "rootNodeIds", "currentNodeId", "title"):
        assert tree[key] == source[key], key
    assert tree["extensions"]["aspen-grove"] == source["extensions"]["aspen-grove"]
    for node_id, node in source["nodes"].items():
        out = tree["nodes"][node_id]
        assert out["content"] == node["content"] and out["author"]["role"] == node["author"]["role"]
        assert out["extensions"].get("aspen-grove") == node.get("extensions", {}).get("aspen-grove")
        for key in ("generation", "editedFrom"):
            assert out.get(key) == node.get(key), key
        assert out["meta"] == {"bookmarked": False, **node.get("meta", {})}
    assert tree["edges"] == source["edges"]  # ids, extensions, hyperedge, annotation: as they were


def test_an_open_loom_export_is_valid_against_the_spec_shape(tmp_path):
    store = LoomStore(tmp_path)
    sid, _ = store.create("Once", token_ids=(7,), model="m")
    store.update(sid, lambda lm: lm.accept(" upon", token_ids=(8,), model="m", score=-0.5))
    store.update(sid, lambda lm: lm.bookmark(lm.cursor))
    doc = json.loads(export_openloom(store, sid))
    assert (doc["format"], doc["version"], doc["generator"]["name"]) == (
        "open-loom",
        "2.0",
        "LLooM",
    )
    (tree,) = doc["trees"]
    assert (
        set(tree["rootNodeIds"]) <= tree["nodes"].keys() and tree["currentNodeId"] in tree["nodes"]
    )
    targets = [e["targetNodeId"] for e in tree["edges"]]
    assert sorted(targets + tree["rootNodeIds"]) == sorted(tree["nodes"])  # one parent edge each
    for edge in tree["edges"]:
        assert edge["type"] == "continuation" and edge["sources"][0]["role"] == "primary"
        assert edge["sources"][0]["nodeId"] in tree["nodes"]
    for node_id, node in tree["nodes"].items():
        assert node["id"] == node_id and node["author"]["role"] in ("human", "model", "mixed")
        assert node["content"][0]["type"] == "text" and node["createdAt"].endswith("Z")
        assert node["extensions"]["lloom"]["kind"] in ("typed", "accepted")
    marked = [n for n in tree["nodes"].values() if n["meta"]["bookmarked"]]
    assert [m["content"][0]["text"] for m in marked] == [" upon"]
    assert store.load(import_file(store, json.dumps(doc))[0]) == store.load(sid)


# -- bounds: memory, time, keys, numbers --------------------------------------------------
def twice(doc: dict, path: tuple, key: str) -> str:
    """`doc` as JSON text where the object at `path` holds `key` twice: the second a copy
    of the first under another id (a hand-merged file; json.loads would keep one)."""
    obj = doc
    for step in path:
        obj = obj[step]
    copy = json.loads(json.dumps(obj[key]))
    if isinstance(copy, dict) and "id" in copy:
        copy["id"] = key
    obj["__TWICE__"] = copy
    return json.dumps(doc).replace('"__TWICE__"', json.dumps(key))


@pytest.mark.parametrize(
    "doc, path, key",
    [
        (ELSEWHERE, ("trees", 0, "nodes"), "b"),
        ({"id": "t", "rootNodeId": "n1", "nodes": {
            "n1": {"id": "n1", "text": "A", "parentId": None, "childrenIds": ["n2"]},
            "n2": {"id": "n2", "text": " b", "parentId": "n1", "childrenIds": []}}},
         ("nodes",), "n2"),
        ({"current": "k0", "nodes": {"k0": {"text": "A", "parentId": None},
                                     "k1": {"text": " b", "parentId": "k0"}}}, ("nodes",), "k1"),
        ({"tree": {"rootNodeId": "x0", "nodes": {
            "x0": {"content": "Go", "parentId": None, "childrenIds": ["x1"]},
            "x1": {"content": " west.", "parentId": "x0", "childrenIds": []}}}},
         ("tree", "nodes"), "x1"),
        (MINILOOM, ("loomTree", "nodeStore"), "3"),
    ],
    ids=["openloom-v2", "openloom-v1", "loomsidian", "exoloom", "miniloom"],
)  # fmt: skip
def test_a_key_twice_in_one_object_is_refused_by_name_in_every_format(tmp_path, doc, path, key):
    store = LoomStore(tmp_path)
    data = twice(json.loads(json.dumps(doc)), path, key)
    with pytest.raises(BadImport) as raised:
        import_file(store, data, "merged.json")
    assert str(raised.value) == (
        f"merged.json cannot be imported: it holds the key {key!r} twice in one object"
    )
    assert store.stories() == []


def test_a_uint64_seed_is_kept_and_written_back(tmp_path):
    doc = json.loads(json.dumps(ELSEWHERE))
    doc["trees"][0]["nodes"]["b"]["generation"]["seed"] = 12345678901234567890
    loom, store, story_id, said = imported(tmp_path, doc)
    kept = store.settings(story_id)[IMPORTED_KEY]["nodes"]["b"]["generation"]
    assert kept["seed"] == 12345678901234567890
    out = json.loads(export_openloom(store, story_id))
    assert out["trees"][0]["nodes"]["b"]["generation"]["seed"] == 12345678901234567890


def test_json_inside_a_mikupad_string_is_bounded_like_the_file(tmp_path):
    deep = {"prompt": "[" * 100_000 + "]" * 100_000, "memoryTokens": "{}"}
    with pytest.raises(BadImport, match="its 'prompt', JSON in a string: it is nested deeper"):
        imported(tmp_path, deep)
    huge = {"prompt": '[{"type": "user", "content": "x", "n": 1e400}]', "memoryTokens": "{}"}
    with pytest.raises(BadImport, match="its 'prompt' holds a number too large for a float"):
        imported(tmp_path, huge)


CHILD_IMPORT = """
import json, resource, sys, tempfile, time
from weave.interop.files import import_file
from weave.loom.store import BadImport, LoomStore
shape, n, k, room = sys.argv[1], *(int(a) for a in sys.argv[2:5])
nodes, length = {}, 0
for i in range(n):
    add = (f"{i:06d} " + "x" * k)[:k]
    parent = str(i - 1) if i else None
    nodes[str(i)] = {"text": add, "parentId": parent} if shape == "loomsidian" else {
        "id": str(i), "parent": parent, "type": "gen",
        "children": [str(i + 1)] if i + 1 < n else [],
        "patch": [{"diffs": [[1, add]], "start1": length, "start2": length,
                   "length1": 0, "length2": k}]}
    length += k
doc = {"current": "0", "nodes": nodes} if shape == "loomsidian" else {
    "loomTree": {"nodeStore": nodes}, "focus": {"id": str(n - 1)}}
data = json.dumps(doc)
del nodes, doc
if room:  # this much address space more than the process has now
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (now + (room << 20),) * 2)
started = time.perf_counter()
with tempfile.TemporaryDirectory() as folder:
    store = LoomStore(folder)
    try:
        story_id, _ = import_file(store, data, "big.json")
        said = len(store.load(story_id).text())
    except BadImport as e:
        said = str(e)
with open("/proc/self/status") as f:  # not ru_maxrss: it keeps the forking parent's peak
    peak_kib = int(next(line for line in f if line.startswith("VmHWM")).split()[1])
print(json.dumps({"said": said, "seconds": time.perf_counter() - started,
                  "peak_mib": peak_kib / 1024}))
"""


def child_import(shape: str, nodes: int, chars: int, room_mib: int = 0) -> dict:
    """Import a chain of `nodes` nodes of `chars` characters each in `shape` in a fresh
    process (with `room_mib` MiB of address space to spare, if given): what it said."""
    done = subprocess.run([sys.executable, "-c", CHILD_IMPORT, shape, str(nodes), str(chars),
                           str(room_mib)], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).parent.parent)  # fmt: skip
    assert done.returncode == 0 and not done.stderr, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_long_miniloom_chain_imports_in_bounded_memory_and_seconds():
    # 5,000 nodes each adding 1,000 characters: every whole text kept took ~12 GB.
    out = child_import("miniloom", 5_000, 1_000)
    assert out["said"] == 5_000_000
    assert out["peak_mib"] < 1_024 and out["seconds"] < 30, out


def test_a_file_that_needs_more_memory_than_there_is_is_one_line():
    out = child_import("loomsidian", 100_000, 600, room_mib=300)  # a 66 MB file
    assert out["said"] == (
        "big.json cannot be imported: reading it (61 MiB) needs more memory than this "
        "process may have"
    )


def test_an_open_loom_v2_round_trip_keeps_what_the_spec_defines_exactly(tmp_path):
    rich = json.loads(json.dumps(ELSEWHERE))  # version "2.1", tree "t1", hyperedges...
    tree = rich["trees"][0]
    tree |= {"createdAt": "2026-06-30T10:00:00Z", "updatedAt": "2026-07-08T21:10:00Z"}
    nodes = tree["nodes"]
    nodes["a"]["author"] |= {"name": "Asher"}
    nodes["a"]["createdAt"] = "2026-07-01T14:30:05+02:00"  # another zone
    nodes["b"]["author"] |= {"name": "Claude", "modelId": "anthropic/claude-sonnet-4.5"}
    nodes["b"]["createdAt"] = "2026-07-01T12:30:05.5Z"  # another precision
    _, store, story_id, _ = imported(tmp_path, rich)
    out = json.loads(export_openloom(store, story_id))
    assert out["version"] == "2.1"
    again = out["trees"][0]
    for key in ("id", "title", "createdAt", "updatedAt", "rootNodeIds", "currentNodeId"):
        assert again[key] == tree[key], key
    for node_id, node in nodes.items():
        written = again["nodes"][node_id]
        assert written["author"] == node["author"], node_id
        assert written.get("createdAt") == node.get("createdAt", written.get("createdAt"))
    assert again["nodes"]["c"]["createdAt"] == "2026-07-01T12:31:00Z"
