"""The loom store against real SQLite files and real processes: nodes only added, tabs and
processes sharing a story, durability under kill -9, locked, damaged, foreign, newer and
read-only files, export and import, and what crafted files and rows cannot do: loop,
overflow, recurse or crash (issue 27)."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.raw_sql import another_program, refused
from tests.test_loom import MOVES, apply
from weave.interop.files import export_json, import_file
from weave.loom.loom import Loom, NoSuchNode
from weave.loom.store import LoomStore
from weave.loom.store_errors import (
    BadImport,
    DamagedStory,
    DatabaseLocked,
    InvalidInput,
    NewerDatabase,
    NotDeleted,
    NotLoomDatabase,
    StorageUnwritable,
    StoryNotFound,
)
from weave.loom.store_file import APPLICATION_ID, FILE_NAME
from weave.loom.store_sql import is_database_url

ROOT = Path(__file__).resolve().parent.parent
WRITER = ROOT / "tests" / "store_writer.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
HOSTILE = {
    "100k": ("long line, 🐉 and e\u0301. " * 4000)[:100_000],
    "emoji": "🐉 dragons 👩\u200d👩\u200d👧 and 🇫🇷 🏳️\u200d🌈",
    "rtl": "שלום עולם مرحبا \u202eRTL override\u202c \u200f",
    "nul": "nul\x00byte\x00",
    "controls": "\ufeffBOM, CR\r\nLF, \u2028, \x1b[31m, \x7f",
    "quotes": "quotes \" ' \\ <>& {braces} `ticks` # heading",
}


def run_writer(folder: Path, story_id: str, tag: str, *args: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(folder), story_id, tag, *map(str, args)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip


def test_importing_the_store_loads_no_backend_page_or_session():
    code = (
        "import sys, weave.loom.store, weave.loom.formats\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('backends', 'mlx', 'streamlit',"
        " 'psycopg', 'psycopg_pool')"
        " or m in ('weave.desk.session', 'weave.search.beams', 'numpy')]\n"
        "print(bad)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, text=True,
                          capture_output=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"


# -- the tree, kept ------------------------------------------------------------------------
def test_moves_are_saved_and_the_file_refuses_to_change_a_node(stories_at):
    store = LoomStore(stories_at)
    sid, loom = store.create("Once upon a time,")
    loom = store.update(sid, lambda lm: lm.accept(" there was", token_ids=(5, 6), model="m",
                                                  params={"cutoff": 0.1}, score=-2.5))  # fmt: skip
    loom = store.update(sid, lambda lm: lm.undo().keep(" a fox").redo())
    assert store.load(sid) == loom  # nodes, cursor, checkouts, bookmarks: all as returned
    assert loom.node().token_ids == (5, 6) and loom.node().params == {"cutoff": 0.1}
    assert store.info(sid).nodes == 4
    with another_program(stories_at) as run:
        with pytest.raises(refused(), match="nodes are never changed"):
            run("UPDATE nodes SET kind = 'typed' WHERE story_id = ?", sid)
        with pytest.raises(refused(), match="only a deleted story"):
            run("DELETE FROM nodes WHERE story_id = ?", sid)
    assert store.load(sid) == loom


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(MOVES, max_size=12))
def test_any_moves_saved_one_by_one_load_back_as_the_same_loom(stories_at, moves):
    store = LoomStore(stories_at)
    sid, loom = store.create("Once")
    for move in moves:
        loom = store.update(sid, lambda lm, move=move: apply(lm, move))
    assert store.load(sid) == loom
    assert store.load(import_file(store, export_json(store, sid))[0]) == loom


def test_a_move_that_removes_or_changes_a_node_is_refused_and_nothing_is_written(stories_at):
    store = LoomStore(stories_at)
    sid, loom = store.create("a")
    cut = {k: v for k, v in loom.nodes.items() if k != loom.cursor}
    with pytest.raises(InvalidInput, match="nodes are only added"):
        store.update(sid, lambda lm: Loom(cut, lm.root, lm.root))
    with pytest.raises(NoSuchNode):
        store.update(sid, lambda lm: lm.accept("b").go("nowhere"))
    with pytest.raises(InvalidInput, match="lone surrogate"):
        store.update(sid, lambda lm: lm.accept("\ud800"))
    assert store.load(sid) == loom


def test_reopening_in_a_new_process_restores_the_tree_cursor_checkouts_and_bookmarks(stories_at):
    script = """
import sys
from weave.loom.store import LoomStore
store = LoomStore(sys.argv[1])
sid, loom = store.create("The forest")
loom = store.update(sid, lambda l: l.accept(" seemed").accept(" darker"))
loom = store.update(sid, lambda l: l.undo().undo().accept(" was dark").bookmark(l.cursor))
store.rename(sid, "Elis")
store.save_settings(sid, {"cutoff": 0.1})
store.save_suggestions(sid, loom.cursor, {"suggestions": [{"text": " and", "logprob": -1.0}]})
print(sid)
"""
    done = subprocess.run([sys.executable, "-c", script, str(stories_at)], env=ENV, check=True,
                          capture_output=True, text=True)  # fmt: skip
    sid = done.stdout.strip()
    store = LoomStore(stories_at)
    loom = store.load(sid)
    assert loom.text() == "The forest was dark"
    assert loom.sibling(-1).redo().text() == "The forest seemed darker"  # its checkout kept
    assert loom.text(next(iter(loom.bookmarks))) == "The forest seemed darker"
    assert store.info(sid).title == "Elis" and store.settings(sid) == {"cutoff": 0.1}
    assert store.suggestions(sid, loom.cursor)["suggestions"][0]["text"] == " and"


def test_two_tabs_on_one_story_both_add_and_each_sees_the_others_nodes(stories_at):
    one, two = LoomStore(stories_at), LoomStore(stories_at)  # two sessions, one file
    sid, start = one.create("Once")
    a = one.update(sid, lambda lm: lm.at(start.cursor).accept(" upon"))
    b = two.update(sid, lambda lm: lm.at(start.cursor).accept(" more"))
    assert b.nodes.keys() > a.nodes.keys()  # tab two's move was made on tab one's nodes
    seen = one.load(sid).at(a.cursor)  # tab one's next rerun
    assert seen.text() == "Once upon" and seen.sibling_position() == (1, 2)
    same = one.update(sid, lambda lm: lm.at(start.cursor).accept(" more"))
    assert same.cursor == b.cursor and len(same.nodes) == 4  # the identical child is shared


def test_suggestions_belong_to_the_node_they_were_made_for(stories_at):
    store = LoomStore(stories_at)
    sid, loom = store.create("a")
    loom = store.update(sid, lambda lm: lm.accept("b"))
    first, second = loom.node().parent, loom.cursor
    store.save_suggestions(sid, first, {"suggestions": [{"logprob": -2.5}]})
    assert store.suggestions(sid, second) is None
    assert store.suggestions(sid, first) == {"suggestions": [{"logprob": -2.5}]}
    for number in (float("nan"), float("inf"), float("-inf")):  # not JSON: refused, kept
        with pytest.raises(InvalidInput, match="not JSON compliant"):
            store.save_suggestions(sid, first, {"suggestions": [{"logprob": number}]})
        with pytest.raises(InvalidInput, match="not JSON compliant"):
            store.save_settings(sid, {"cutoff": number})
    assert store.suggestions(sid, first) == {"suggestions": [{"logprob": -2.5}]}
    store.save_suggestions(sid, first, {"n": 2})
    assert store.suggestions(sid, first) == {"n": 2}
    store.save_suggestions(sid, first, None)
    assert store.suggestions(sid, first) is None
    with pytest.raises(InvalidInput, match="has no node"):
        store.save_suggestions(sid, "nowhere", {})
    with pytest.raises(InvalidInput, match="cannot be saved as JSON"):
        store.save_settings(sid, {"x": object()})


# -- the list of stories -------------------------------------------------------------------
def test_titles_list_rename_delete_restore_purge(stories_at):
    store = LoomStore(stories_at)
    first, _ = store.create("  Once   upon\na time  ")
    second, _ = store.create("second story")
    assert store.info(first).title == "Once upon"  # its first line (issue 34)
    store.update(first, lambda lm: lm.edit("Something else entirely"))
    assert [i.id for i in store.stories()] == [first, second]  # last changed first
    assert store.info(first).title == "Something else entirely"  # as it reads now (issue 41)
    store.rename(first, "My fox tale")
    assert store.info(first).title == "My fox tale"
    with pytest.raises(InvalidInput, match="title needs a visible character; the old title"):
        store.rename(first, " \t\u3000 ")  # a box cleared by mistake keeps its title
    assert store.info(first).title == "My fox tale"
    store.delete(second)
    assert [i.id for i in store.stories()] == [first]
    assert [i.id for i in store.stories(deleted=True)] == [second]
    assert store.load(second).text() == "second story"  # deleted is kept
    with pytest.raises(NotDeleted, match="only a deleted story can be purged"):
        store.purge(first)
    store.restore(second)
    assert {i.id for i in store.stories()} == {first, second}
    with pytest.raises(StoryNotFound, match="no story nope"):
        store.load("nope")


def test_purge_leaves_no_row_of_the_story(stories_at):
    store = LoomStore(stories_at)
    keep, _ = store.create("kept story")
    sid, loom = store.create("a story to purge")
    store.update(sid, lambda lm: lm.accept(" and a branch").bookmark(lm.cursor).undo())
    store.save_suggestions(sid, loom.cursor, {"text": "suggested"})
    store.share(sid, "ana@example.org", may_write=True)
    store.delete(sid)
    store.purge(sid)
    with another_program(stories_at) as run:
        for table in ("nodes", "checkouts", "bookmarks", "suggestions", "shares"):
            assert run(f"SELECT COUNT(*) FROM {table} WHERE story_id = ?", sid) == [(0,)], table
        assert run("SELECT id FROM stories") == [(keep,)]


def test_purge_removes_the_text_for_real(tmp_path):
    store = LoomStore(tmp_path)
    keep, _ = store.create("kept story")
    marker = "purple-elephant-7319 " * 50
    sid, loom = store.create(marker)
    store.save_suggestions(sid, loom.cursor, {"text": marker})
    store.delete(sid)
    store.purge(sid)
    assert [i.id for i in store.stories()] == [keep]
    with pytest.raises(StoryNotFound):
        store.load(sid)
    on_disk = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"purple-elephant-7319" not in on_disk


def test_a_damaged_value_is_named_and_the_other_stories_still_open(stories_at):
    store = LoomStore(stories_at)
    good, _ = store.create("good")
    bad, _ = store.create("bad")
    with another_program(stories_at) as run:
        run("UPDATE stories SET settings = '{broken' WHERE id = ?", bad)
    with pytest.raises(DamagedStory, match=f"story {bad} cannot be read"):
        store.settings(bad)
    assert store.load(good).text() == "good"
    assert {i.id for i in store.stories()} == {good, bad}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_comes_back_exactly_and_survives_export(stories_at, text):
    store = LoomStore(stories_at)
    sid, _ = store.create(text)
    loom = store.update(sid, lambda lm: lm.accept(text))
    assert store.load(sid).text() == text + text
    copy = import_file(store, export_json(store, sid))[0]
    assert store.load(copy).text() == text + text and store.load(copy).nodes == loom.nodes


# -- durability and concurrency ------------------------------------------------------------
def assert_whole(where: Path | str) -> None:
    """The database's own check finds nothing wrong (SQLite's integrity_check; PostgreSQL's
    amcheck on every index of LLooM's tables, which also reads the rows they point to)."""
    with another_program(where) as run:
        if is_database_url(where):
            run("CREATE EXTENSION IF NOT EXISTS amcheck")
            indexes = run("SELECT c.oid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                          "JOIN pg_namespace n ON n.oid = c.relnamespace "
                          "WHERE n.nspname = 'lloom'")  # fmt: skip
            for (index,) in indexes:
                run("SELECT bt_index_check(?::regclass, true)", index)
        else:
            assert run("PRAGMA integrity_check") == [("ok",)]


def test_a_writer_killed_mid_write_leaves_every_committed_node(stories_at):
    sid, _ = LoomStore(stories_at).create("start")
    writer = run_writer(stories_at, sid, "w", 1_000_000, 50_000)
    last = 0
    for line in writer.stdout:
        last = int(line)
        if last >= 40:
            break
    os.kill(writer.pid, signal.SIGKILL)  # most likely in the middle of its next write
    writer.wait()
    assert_whole(stories_at)
    store = LoomStore(stories_at)
    loom = store.load(sid)
    count = len(loom.nodes) - 2
    assert count >= last  # all it reported saved is there, in order, whole
    assert loom.text() == "start" + "".join(f" w{i}" + "x" * 50_000 for i in range(1, count + 1))
    assert store.update(sid, lambda lm: lm.accept(" after")).text().endswith(" after")


def test_two_processes_adding_nodes_to_one_story_lose_nothing(stories_at):
    sid, start = LoomStore(stories_at).create("start")
    writers = [run_writer(stories_at, sid, tag, 30) for tag in ("a", "b")]
    for w in writers:
        w.communicate()
        assert w.returncode == 0
    loom = LoomStore(stories_at).load(sid)
    assert len(loom.nodes) == 2 + 60
    for tag in ("a", "b"):
        leaf = loom.child_with_text(start.cursor, f" {tag}1")
        while loom.children(leaf.id):
            (leaf,) = loom.children(leaf.id)
        assert loom.text(leaf.id) == "start" + "".join(f" {tag}{i}" for i in range(1, 31))


def test_threads_sharing_one_store_keep_their_own_stories(stories_at):
    store = LoomStore(stories_at)
    ids = [store.create(f"story {n}")[0] for n in range(4)]
    errors = []

    def write(n: int) -> None:
        try:
            for i in range(20):
                store.update(ids[n], lambda lm, i=i: lm.accept(f" {n}.{i}"))
        except Exception as e:  # surfaced below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n, sid in enumerate(ids):
        assert store.load(sid).text() == f"story {n}" + "".join(f" {n}.{i}" for i in range(20))


def test_processes_opening_a_new_folder_at_once_share_one_database(stories_at):
    folder = stories_at if is_database_url(stories_at) else stories_at / "new"  # new, empty
    code = "import sys\nimport weave.loom.store as s\ns.LoomStore(sys.argv[1]).create(sys.argv[2])"
    starts = [
        subprocess.Popen([sys.executable, "-c", code, str(folder), f"p{n}"], env=ENV,
                         stderr=subprocess.PIPE, text=True)
        for n in range(6)
    ]  # fmt: skip
    for p in starts:
        assert p.wait() == 0, p.stderr.read()
    store = LoomStore(folder)
    assert sorted(store.load(i.id).text() for i in store.stories()) == [f"p{n}" for n in range(6)]


def test_the_file_is_ours_in_wal_mode(tmp_path):
    LoomStore(tmp_path).create("x")
    head = (tmp_path / FILE_NAME).read_bytes()[:100]
    assert int.from_bytes(head[68:72], "big") == APPLICATION_ID
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_empty_file_is_taken_as_a_new_database(tmp_path):
    (tmp_path / FILE_NAME).write_bytes(b"")
    store = LoomStore(tmp_path)
    assert store.load(store.create("x")[0]).text() == "x"


def test_a_locked_database_is_a_clear_error_and_loses_nothing(stories_at):
    store = LoomStore(stories_at, busy_ms=200)
    sid, _ = store.create("x")
    with another_program(stories_at) as run:
        run("BEGIN")  # another writer, mid-transaction, holding the story's row (SQLite: all)
        run("UPDATE stories SET updated = updated WHERE id = ?", sid)
        try:
            with pytest.raises(DatabaseLocked, match="stayed locked by another .* for 200 ms"):
                store.update(sid, lambda lm: lm.accept("y"))
            assert store.load(sid).text() == "x"  # readers go on while a writer holds the lock
        finally:
            run("ROLLBACK")
    assert store.update(sid, lambda lm: lm.accept("y")).text() == "xy"


# -- files that are not ours, and folders we cannot write ----------------------------------
def _damaged(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[4096 : 4096 + 64] = b"\xa5" * 64  # page 2: a table's b-tree page
    path.write_bytes(bytes(data))


def _newer(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")


def _older(path: Path) -> None:  # a development build's file: schema 2 never shipped
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 2")


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: 4096 * 2])


@pytest.mark.parametrize(
    "spoil, error, message",
    [
        (lambda p: p.write_bytes(b"this is not a database\n" * 100), NotLoomDatabase,
         "is not a LLooM database or is damaged; it was left untouched; move it aside"),
        (lambda p: sqlite3.connect(p).execute("CREATE TABLE notes (x)").connection.close(),
         NotLoomDatabase, "not a LLooM database"),
        (_damaged, NotLoomDatabase, "is damaged; it was left untouched"),
        (_truncated, NotLoomDatabase, "is damaged; it was left untouched"),
        (_newer, NewerDatabase, "written by a newer LLooM .schema 99.*left untouched"),
        (_older, NotLoomDatabase, "schema 2, from a development build .*left untouched"),
    ],
    ids=["junk", "foreign sqlite", "damaged page", "truncated", "newer schema", "older schema"],
)  # fmt: skip
def test_a_file_that_is_not_ours_or_is_damaged_is_left_untouched(tmp_path, spoil, error, message):
    path = tmp_path / FILE_NAME
    if spoil.__name__.startswith("_"):  # spoil a real store of ours
        store = LoomStore(tmp_path)
        for _ in range(5):
            sid, _ = store.create("y" * 10_000)
            store.update(sid, lambda lm: lm.accept("z" * 20_000))
        with sqlite3.connect(path) as db:  # all in the main file, none in the WAL
            db.execute("PRAGMA journal_mode = DELETE")
        assert sorted(os.listdir(tmp_path)) == [FILE_NAME]
    spoil(path)
    before = path.read_bytes()
    with pytest.raises(error, match=message):
        LoomStore(tmp_path)
    assert path.read_bytes() == before
    assert not any(name.endswith("-backup") for name in os.listdir(tmp_path))


_OPEN = """
import sys
from weave.loom.store import LoomStore, StoreError
try:
    LoomStore(sys.argv[1])
    print("opened")
except StoreError as e:
    print(type(e).__name__, e)
"""


def _without_permission_overrides() -> None:
    """In the child: root keeps no capability that bypasses file permissions."""
    if os.getuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "cannot drop a capability")


def _open_as_a_user(folder: Path) -> str:
    """Open a store in a subprocess that file permissions apply to, even under root."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _OPEN, str(folder)], cwd=ROOT, check=True, text=True,
            preexec_fn=_without_permission_overrides, capture_output=True, env=ENV,
        )  # fmt: skip
    except subprocess.SubprocessError as e:
        pytest.skip(f"cannot run a process that permissions apply to: {e}")
    return done.stdout.strip()


def test_a_read_only_data_folder_is_a_clear_error(tmp_path):
    empty, saved = tmp_path / "empty", tmp_path / "saved"
    empty.mkdir()
    LoomStore(saved).create("kept")
    before = (saved / FILE_NAME).read_bytes()
    (saved / FILE_NAME).chmod(0o444)
    try:
        for folder in (empty, saved):
            folder.chmod(0o555)
            answer = _open_as_a_user(folder)
            assert answer.startswith("StorageUnwritable"), answer
            assert "writable by this user" in answer and str(folder) in answer
    finally:
        for folder in (empty, saved):
            folder.chmod(0o755)
    assert (saved / FILE_NAME).read_bytes() == before
    assert os.listdir(empty) == []
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(StorageUnwritable, match="cannot create the data folder"):
        LoomStore(blocked / "data")


# -- export and import ---------------------------------------------------------------------
def test_export_then_import_gives_the_same_loom(stories_at):
    store = LoomStore(stories_at)
    sid, loom = store.create("Once", token_ids=(1,), model="m")
    loom = store.update(sid, lambda lm: lm.keep(" a", params={"n": 3}, score=-0.5, kind="sampled")
                        .accept(" b").bookmark(lm.cursor).undo())  # fmt: skip
    store.rename(sid, "Title")
    store.save_settings(sid, {"cutoff": 0.1})
    store.save_suggestions(sid, loom.cursor, {"suggestions": []})
    exported = json.loads(export_json(store, sid))
    assert exported["format"] == "lloom-loom" and exported["version"] == 1
    copy = import_file(store, export_json(store, sid))[0]
    assert copy != sid and store.load(copy) == loom
    again = json.loads(export_json(store, copy))
    assert {k: v for k, v in again.items() if k not in ("id", "updated")} == {
        k: v for k, v in exported.items() if k not in ("id", "updated")
    }


@pytest.mark.parametrize(
    "data, message",
    [
        ("not json", "not JSON"),
        ('{"format": "something"}', "not a LLooM file"),
        ('{"format": "lloom-loom", "version": 9}', "version 9; this LLooM reads version 1"),
        ('{"format": "lloom-loom", "version": 1, "nodes": [{"id": "x"}]}', "a node must be"),
        ('{"format": "lloom-session", "history": []}', "not a LLooM file"),
    ],
)
def test_a_file_that_cannot_be_imported_says_why(stories_at, data, message):
    store = LoomStore(stories_at)
    with pytest.raises(BadImport, match=message):
        import_file(store, data)
    assert store.stories() == []


@pytest.mark.parametrize(
    "spoil, message",
    [
        (lambda d: d["nodes"][1].update(parent=""), "does not come after its parent"),
        (lambda d: d["nodes"].append(d["nodes"][1]), "appears twice"),
        (lambda d: d["nodes"][1].update(kind="dreamt"), "unknown kind"),
        (lambda d: d["nodes"][1].update(token_ids=[-1]), "not non-negative ints"),
        (lambda d: d.update(cursor="nowhere"), "name a node it does not hold"),
        (lambda d: d["suggestions"].update(nowhere={}), "under nodes it holds"),
    ],
    ids=["orphan", "twice", "kind", "ids", "cursor", "suggestions"],
)
def test_an_export_that_was_tampered_with_is_refused(stories_at, spoil, message):
    store = LoomStore(stories_at)
    sid, _ = store.create("Once")
    doc = json.loads(export_json(store, sid))
    spoil(doc)
    with pytest.raises(BadImport, match=message):
        import_file(store, json.dumps(doc))
    assert len(store.stories()) == 1


def test_numbers_json_cannot_hold_never_reach_the_store_or_an_export(stories_at):
    store = LoomStore(stories_at)
    sid, loom = store.create("Once")
    loom = store.update(sid, lambda lm: lm.accept(" upon"))
    store.save_suggestions(sid, loom.cursor, {"suggestions": [{"logprob": -1.0}]})
    text = export_json(store, sid).replace('"logprob": -1.0', '"logprob": NaN')
    doc = json.loads(text)  # as a hand-edited file (Python reads NaN)
    doc["settings"] = {"cutoff": float("inf")}
    doc["suggestions"][loom.node().parent] = {"suggestions": [{"logprob": -3.0}]}
    copy = import_file(store, json.dumps(doc))[0]  # the search holding NaN is left out
    assert store.load(copy).text() == "Once upon"
    assert store.suggestions(copy, loom.cursor) is None and store.settings(copy) == {}
    assert store.suggestions(copy, loom.node().parent) == {"suggestions": [{"logprob": -3.0}]}
    doc["nodes"][-1]["score"] = float("inf")
    with pytest.raises(BadImport, match="has a score that is not a number within"):
        import_file(store, json.dumps(doc))
    with another_program(stories_at) as run:  # as the loom saved it before it checked
        run("UPDATE suggestions SET data = ? WHERE story_id = ?",
            '{"suggestions": [{"logprob": NaN}]}', sid)  # fmt: skip
        run("INSERT INTO nodes (story_id, id, seq, parent, kind, score, created, text) "
            "SELECT ?, 'inf', MAX(seq) + 1, ?, 'accepted', ?, 0, ' x' FROM nodes "
            "WHERE story_id = ?", sid, loom.cursor, float("inf"), sid)  # fmt: skip
    exported = json.loads(export_json(store, sid), parse_constant=pytest.fail)  # NaN: fails
    assert exported["suggestions"] == {} and exported["nodes"][-1]["score"] is None


# -- what crafted files and rows cannot do (issue 27) ----------------------------------------
def loom_cli(where: Path | str, *args: str) -> subprocess.CompletedProcess:
    """`python -m weave loom ...` on the store at `where` (a data folder or a database URL)."""
    chosen = "LLOOM_DATABASE_URL" if is_database_url(where) else "LLOOM_DATA_DIR"
    return subprocess.run(
        [sys.executable, "-m", "weave", "loom", *args], cwd=ROOT, capture_output=True,
        text=True, timeout=120, env={**ENV, chosen: str(where)},
    )  # fmt: skip


def one_error(done: subprocess.CompletedProcess, *parts: str) -> None:
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert all(part in done.stderr for part in parts), done.stderr


def test_a_parent_cycle_written_into_the_file_is_one_error_naming_the_story_and_node(stories_at):
    store = LoomStore(stories_at)
    good, _ = store.create("good")
    sid, loom = store.create("Once")
    loom = store.update(sid, lambda lm: lm.accept(" upon").accept(" a time"))
    first, second, _ = (n.id for n in loom.path()[1:])
    with another_program(stories_at) as run:  # another program, triggers dropped
        run("DROP TRIGGER nodes_stay" + (" ON nodes" if is_database_url(stories_at) else ""))
        run("UPDATE nodes SET parent = ? WHERE id = ?", second, first)
    message = f"story {sid} cannot be read: node {first!r} comes before its parent {second!r}"
    for read in (store.load, partial(export_json, store)):
        with pytest.raises(DamagedStory, match=message):
            read(sid)
    one_error(loom_cli(stories_at, "show", sid), f"story {sid}", first)
    one_error(loom_cli(stories_at, "export", sid), f"story {sid}", first)
    assert store.load(good).text() == "good"  # the others open


def _document(tmp_path: Path) -> dict:
    store = LoomStore(tmp_path / "source")
    sid, _ = store.create("Once", token_ids=(7,), model="m")
    store.update(sid, lambda lm: lm.accept(" upon", token_ids=(8,), model="m", score=-0.5))
    return json.loads(export_json(store, sid))


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_an_import_nested_deep_is_one_error_naming_the_file(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"format": "lloom-loom", "nodes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    one_error(loom_cli(tmp_path, "import", str(deep)), str(deep), "nested deeper than 64")
    doc, store = _document(tmp_path), LoomStore(tmp_path)
    for place in ("settings", "suggestions"):
        spoilt = {**doc, place: {doc["cursor"]: _nested(700)}}
        with pytest.raises(BadImport, match="the file cannot be imported: it is nested deeper"):
            import_file(store, json.dumps(spoilt))
    doc["settings"] = {"deep": _nested(40)}  # a deep but sane value still imports
    assert store.settings(import_file(store, json.dumps(doc))[0]) == doc["settings"]
    assert len(store.stories()) == 1


@pytest.mark.parametrize(
    "spoil, message",
    [
        (lambda d: d.update(created=10**400), "does not fit 64 bits"),
        (lambda d: d["nodes"][-1].update(score=10**400), "does not fit 64 bits"),
        (lambda d: d["nodes"][-1].update(score=10**20), "does not fit 64 bits"),
        (lambda d: d["nodes"][-1].update(score=1e20), "score that is not a number within"),
        (lambda d: d["nodes"][-1].update(created=1e300), "a time must be seconds"),
        (lambda d: d["nodes"][-1].update(created=-5), "a time must be seconds"),
        (lambda d: d["nodes"][-1].update(token_ids=[2**31]), "non-negative ints below"),
        (lambda d: d["nodes"][-1].update(model=["m"]), "a model that is not a string"),
    ],
    ids=["created 10**400", "score 10**400", "score 10**20", "score 1e20", "time 1e300",
         "time < 0", "id 2**31", "model"],
)  # fmt: skip
def test_numbers_out_of_range_in_an_import_are_refused(stories_at, tmp_path, spoil, message):
    doc = _document(tmp_path)
    spoil(doc)
    with pytest.raises(BadImport, match=message):
        import_file(LoomStore(stories_at), json.dumps(doc))
    assert LoomStore(stories_at).stories() == []


def test_an_import_out_of_range_on_the_command_line_is_one_error_and_ids_a_model_lacks_pass(
    tmp_path,
):
    doc = _document(tmp_path)
    doc["nodes"][-1]["score"] = 10**400
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    one_error(loom_cli(tmp_path, "import", str(bad)), str(bad), "does not fit 64 bits")
    doc["nodes"][-1].update(score=-1, token_ids=[1_000_000])  # no vocabulary check here:
    sid = import_file(LoomStore(tmp_path), json.dumps(doc))[0]  # the session makes that one
    assert LoomStore(tmp_path).load(sid).node().token_ids == (1_000_000,)


def test_loom_show_of_a_long_chain_grows_with_its_nodes_not_their_depth(tmp_path):
    doc, n = _document(tmp_path), 50_000
    root, first = doc["nodes"][:2]
    chain = [{**first, "id": f"c{i}", "parent": f"c{i - 1}" if i else root["id"], "text": " w"}
             for i in range(n)]  # fmt: skip
    doc.update(nodes=[root, *chain], cursor=f"c{n - 1}", checkouts={}, suggestions={})
    sid = import_file(LoomStore(tmp_path), json.dumps(doc))[0]
    shown = loom_cli(tmp_path, "show", sid)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == n + 1 and len(shown.stdout) < 30 * (n + 1)  # one column: no indent
    assert lines[-1] == f"*  ↳ c{n - 1} ' w'"  # an only child: its parent's column, ↳


def test_loom_show_indents_where_the_story_branches_and_no_deeper_than_a_bound(stories_at):
    store = LoomStore(stories_at)
    sid, loom = store.create("a")
    for i in range(20):  # a comb: each node branches, so each level is indented
        store.update(sid, lambda lm, i=i: lm.keep(f"x{i}").accept(f"b{i}"))
    lines = loom_cli(stories_at, "show", sid).stdout.splitlines()
    # each level in: two spaces, then "│  " joining a branch to the siblings below it
    drawn = [len(line[3:]) - len(line[3:].lstrip(" │├└─")) for line in lines]
    assert max(drawn) == 5 * 16 and "(20) " in lines[-1]  # MAX_INDENT levels, then said
    assert lines[-1].startswith("* ") and lines[-1].endswith("'b19'")


def test_rows_another_program_wrote_read_back_with_the_story_whole(tmp_path):
    store = LoomStore(tmp_path)
    sid, loom = store.create("Once", token_ids=(1,), model="m")
    loom = store.update(sid, lambda lm: lm.accept(" upon", score=-1.0).accept(" a time"))
    one, two, three = (n.id for n in loom.path()[1:])
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute("DROP TRIGGER nodes_stay")
        db.execute("UPDATE nodes SET text = CAST(text AS BLOB) WHERE id = ?", (one,))
        db.execute("UPDATE nodes SET text = X'20ff', score = 'n/a' WHERE id = ?", (two,))
        db.execute("UPDATE nodes SET token_ids = '[1, \"x\"]', params = '{bad', "
                   "created = 'yesterday' WHERE id = ?", (three,))  # fmt: skip
        db.execute("UPDATE stories SET title = CAST('Tale' AS BLOB) WHERE id = ?", (sid,))
    loom = store.load(sid)
    assert loom.text() == "Once \ufffd a time" and loom.node(two).score is None
    assert (loom.node(three).token_ids, loom.node(three).created) == (None, 0.0)
    shown = loom_cli(tmp_path, "show", sid, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["title"] == "Tale"
    exported = loom_cli(tmp_path, "export", sid)
    assert exported.returncode == 0, exported.stderr
    assert store.load(import_file(store, exported.stdout)[0]).text() == "Once \ufffd a time"
