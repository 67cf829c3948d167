"""Where every node came from (`weave.loom.provenance`), made by a tab on the real MLX backend,
kept by the store (an older store reads as unknown provenance), shown in the story tree's
tooltips, in Go to, and by `loom show --json`; and the CLI's import and export formats."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.older_stores import as_schema
from tests.test_store import loom_cli
from weave.desk.session import Workspace
from weave.loom.provenance import UNKNOWN, Provenance
from weave.loom.store import LoomStore
from weave.loom.store_file import FILE_NAME, SCHEMA_VERSION
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams
from weave.view.loom_view import node_label, story_tree
from weave.view.story_graph import StoryNode, render_story_tree

PARAMS = SearchParams(cutoff=0.1, max_depth=4, max_suggestions=8, auto_stop=False)


def test_each_way_of_making_a_node_is_recorded_with_its_search(tmp_path, mlx_backend):
    ws = Workspace(LoomStore(tmp_path))
    assert ws.start("The fox crept to the well.")
    start = ws.cursor
    offer = ws.offers.suggest(mlx_backend, ws.spot, PARAMS)
    first, second = offer.result.suggestions[:2]
    ws.keep(offer.piece(first), None, prefix_space=True)
    ws.accept(offer.piece(second), "an edited text", prefix_space=True)
    edited = ws.cursor
    ws.go(start)
    ws.accept(offer.piece(second), None, prefix_space=True)
    taken = ws.cursor
    draw = ws.offers.sample(mlx_backend, ws.spot, RamifyParams(n=2, max_tokens=4, seed=7))
    ws.accept(draw.piece(draw.result.samples[0]), None, prefix_space=True)
    sampled = ws.cursor
    ws.edit(ws.text + " Then")
    typed = ws.cursor
    ws.edit(ws.text + " it", how="alternative")
    loom = ws.store.load(ws.story_id)
    assert loom.node(start).provenance == Provenance("typed")  # the story's first text
    made = {n.text: n.provenance for n in loom.children(start)}
    kept = made[first.text]
    assert (kept.how, kept.rank, kept.backend, kept.model) == (
        "kept", 1, mlx_backend.name, mlx_backend.model_name)  # fmt: skip
    assert kept.latency_ms == pytest.approx(offer.result.stats.seconds * 1000)
    assert loom.node(taken).provenance.how == "suggestion"
    assert loom.node(taken).provenance.rank == 2
    assert loom.node(taken).provenance.probability == pytest.approx(2.718281828**second.score)
    assert loom.node(edited).provenance.how == "edited suggestion"
    sample = loom.node(sampled).provenance
    assert (sample.how, sample.seed, sample.rank) == ("sampled", 7, None)
    assert loom.node(typed).provenance == Provenance("typed")
    assert loom.node(ws.cursor).provenance == Provenance("alternative")
    shown = json.loads(loom_cli(tmp_path, "show", ws.story_id, "--json").stdout)
    by_id = {n["id"]: n["provenance"] for n in shown["nodes"]}
    assert by_id[taken] == loom.node(taken).provenance.to_dict() and by_id[taken]["rank"] == 2
    assert "suggestion 2 (p=" in story_tree(loom, ws.story_id).source
    assert "— suggestion 2 (p=" in node_label(loom, taken)


def test_a_schema_5_store_opens_and_its_nodes_say_their_provenance_is_unknown(tmp_path):
    store = LoomStore(tmp_path)
    story_id, loom = store.create("Written before provenance.")
    as_schema(tmp_path / FILE_NAME, 5)
    again = LoomStore(tmp_path)
    assert again.load(story_id).text() == "Written before provenance."
    node = again.load(story_id).node()
    assert node.provenance is None and UNKNOWN in node_label(again.load(story_id), node.id)
    assert f"— {UNKNOWN}" in story_tree(again.load(story_id), story_id).source
    shown = json.loads(loom_cli(tmp_path, "show", story_id, "--json").stdout)
    assert shown["nodes"][1]["provenance"] == {"how": "unknown"}
    made = again.update(story_id, lambda lm: lm.accept(" Later.", provenance=Provenance("typed")))
    assert again.load(story_id).node(made.cursor).provenance == Provenance("typed")
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


@pytest.mark.parametrize(
    "data, message",
    [
        ({"how": "dreamt"}, "how is one of"),
        ({"how": "typed", "rank": -1}, "rank is a non-negative int"),
        ({"how": "typed", "latency_ms": "slow"}, "latency_ms is a finite number"),
        ({"how": "typed", "colour": "red"}, "unknown field 'colour'"),
        ({"rank": 1}, "an object with a 'how'"),
    ],
)
def test_a_provenance_that_cannot_be_read_says_which_field(data, message):
    with pytest.raises(ValueError, match=message):
        Provenance.from_dict(data)


def test_the_cli_imports_any_format_and_exports_open_loom(tmp_path):
    socketteer = tmp_path / "tree.json"
    socketteer.write_text(json.dumps({"root": {"text": "Rain", "children": [
        {"text": " fell.", "children": [], "visited": True}]}, "chapters": {}}))  # fmt: skip
    done = loom_cli(tmp_path, "import", str(socketteer))
    story_id = done.stdout.strip()
    assert done.returncode == 0 and len(story_id) == 12, done.stderr
    assert (
        done.stderr
        == "Imported from socketteer loom. Kept with the story but not shown here: its chapters.\n"
    )
    out = loom_cli(tmp_path, "export", story_id, "--format", "openloom")
    doc = json.loads(out.stdout)
    assert doc["format"] == "open-loom" and doc["trees"][0]["extensions"]["socketteer-loom"]
    again = tmp_path / "again.openloom"
    again.write_text(out.stdout)
    second = loom_cli(tmp_path, "import", str(again), "--format", "openloom").stdout.strip()
    store = LoomStore(tmp_path)
    assert store.load(second) == store.load(story_id)
    wrong = loom_cli(tmp_path, "import", str(socketteer), "--format", "mikupad")
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1
    assert "a mikupad file with a missing or wrong value" in wrong.stderr


def test_a_run_drawn_as_one_node_names_each_way_its_nodes_were_made():
    nodes = [StoryNode("r", None, ""), StoryNode("a", "r", "Once", made="typed"),
             StoryNode("b", "a", " upon", made="suggestion 1 (p=0.5)")]  # fmt: skip
    source = render_story_tree(nodes, cursor="r").source
    assert 'tooltip="Once upon (2 steps) — typed; suggestion 1 (p=0.5)"' in source
