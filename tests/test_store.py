"""The SQLite story store: history, undo/redo, durability, hostile text, concurrency."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weave.session import BookError, MemoryBook
from weave.store import FILE_NAME, Store

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = [
    "x" * 100_000,
    "🐉 dragons 👩‍👩‍👧 and 🇫🇷",
    "e\u0301 a\u0308 combining",
    "שלום עולם مرحبا RTL",
    "nul\x00byte",
    "lone \ud800 surrogate \udfff",
    "quotes \" ' \\ <>& {braces}",
]


def texts(saved) -> list[str]:
    return [c.text for c in saved.history]


def test_history_is_appended_and_undo_redo_move_through_it(tmp_path):
    store = Store(tmp_path)
    sid = store.create("Once")
    store.record(sid, "Once upon", "accept")
    store.record(sid, "Once upon a time", "edit")
    store.move(sid, 1)  # undo
    saved = store.load(sid)
    assert texts(saved) == ["Once", "Once upon", "Once upon a time"] and saved.position == 1
    store.move(sid, 2)  # redo
    assert store.load(sid).position == 2
    store.move(sid, 0)
    store.record(sid, "Once more", "edit")  # an edit after undo branches: no redo
    saved = store.load(sid)
    assert texts(saved) == ["Once", "Once more"] and saved.position == 1
    everything = [c.text for c in store.all_changes(sid)]
    assert everything == ["Once", "Once upon", "Once upon a time", "Once more"]  # nothing lost
    with pytest.raises(BookError, match="no state 5"):
        store.move(sid, 5)


def test_reopening_after_a_restart_finds_everything(tmp_path):
    store = Store(tmp_path)
    sid = store.create("The forest")
    store.record(sid, "The forest seemed darker", "accept")
    store.move(sid, 0)
    store.rename(sid, "Elis")
    store.save_settings(sid, {"cutoff": 0.1})
    store.save_search(sid, {"tree": {"children": []}})
    again = Store(tmp_path).load(sid)
    assert again.title == "Elis" and again.position == 0
    assert texts(again) == ["The forest", "The forest seemed darker"]
    assert again.settings == {"cutoff": 0.1} and again.search == {"tree": {"children": []}}


def test_stories_list_rename_delete_restore_purge(tmp_path):
    store = Store(tmp_path)
    first, second = store.create("first words here"), store.create("second")
    store.record(first, "first words here, edited", "edit")
    assert [e.id for e in store.stories()] == [first, second]  # last edited first
    assert store.stories()[0].title == "first words here"
    store.delete(second)
    assert [e.id for e in store.stories()] == [first]
    assert [e.id for e in store.stories(deleted=True)] == [second]
    with pytest.raises(BookError, match="only a deleted story"):
        store.purge(first)
    store.restore(second)
    store.delete(second)
    store.purge(second)
    assert store.load(second) is None and store.stories(deleted=True) == []
    with pytest.raises(BookError, match="no story"):
        store.rename("nope", "x")


def test_a_killed_writer_leaves_the_last_committed_state(tmp_path):
    sid = Store(tmp_path).create("start")
    writer = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "store_writer.py"), str(tmp_path), sid],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    last = 0
    for line in writer.stdout:
        last = int(line)
        if last >= 40:
            break
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    saved = Store(tmp_path).load(sid)
    count = len(saved.history) - 1
    assert count >= last  # everything it reported committed is there
    assert saved.history[-1].text.startswith(f"state {count} ")
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_file_that_is_not_ours_is_left_untouched(tmp_path):
    path = tmp_path / FILE_NAME
    junk = b"this is not a database\n" * 100
    path.write_bytes(junk)
    with pytest.raises(
        BookError, match="not a LLooM database or is damaged; it was left untouched"
    ):
        Store(tmp_path)
    assert path.read_bytes() == junk
    other = tmp_path / "other"
    other.mkdir()
    with sqlite3.connect(other / FILE_NAME) as db:  # a real SQLite file, someone else's
        db.execute("CREATE TABLE notes (x)")
    before = (other / FILE_NAME).read_bytes()
    with pytest.raises(BookError, match="not a LLooM database"):
        Store(other)
    assert (other / FILE_NAME).read_bytes() == before


def test_a_read_only_folder_is_a_clear_error(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if not os.access(folder, os.W_OK):  # root ignores permissions: checked below instead
            with pytest.raises(BookError, match="permissions|cannot"):
                Store(folder)
    finally:
        folder.chmod(0o700)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(BookError, match="cannot create the data folder"):
        Store(blocked / "data")


def test_a_locked_database_is_a_clear_error(tmp_path, monkeypatch):
    store = Store(tmp_path)
    sid = store.create("x")
    monkeypatch.setattr("weave.store.BUSY_MS", 200)
    holder = sqlite3.connect(tmp_path / FILE_NAME, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(BookError, match="locked"):
            store.record(sid, "y", "edit")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert texts(store.load(sid)) == ["x"]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_round_trips_exactly(tmp_path, text):
    store = Store(tmp_path)
    sid = store.create(text)
    store.record(sid, text + text[:10], "accept")
    store.rename(sid, text[:60])
    saved = Store(tmp_path).load(sid)
    assert texts(saved) == [text, text + text[:10]]
    assert saved.title == text[:60]


def test_threads_keep_their_own_stories(tmp_path):
    store = Store(tmp_path)
    ids = [store.create(f"story {n}") for n in range(4)]
    errors = []

    def write(n: int) -> None:
        try:
            for i in range(25):
                store.record(ids[n], f"story {n} step {i}", "edit")
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n, sid in enumerate(ids):
        assert texts(store.load(sid)) == [f"story {n}"] + [f"story {n} step {i}" for i in range(25)]


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("record"), st.text(max_size=5)),
        st.tuples(st.just("move"), st.integers(0, 8)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(actions=ACTIONS)
def test_the_store_behaves_as_the_in_memory_book(tmp_path_factory, actions):
    store, memory = Store(tmp_path_factory.mktemp("prop")), MemoryBook()
    ids = (store.create("start"), memory.create("start"))
    for action, arg in actions:
        outcomes = []
        for book, sid in zip((store, memory), ids, strict=True):
            try:
                getattr(book, action)(sid, *((arg, "edit") if action == "record" else (arg,)))
                outcomes.append(None)
            except BookError:
                outcomes.append("error")
        assert outcomes[0] == outcomes[1]
    a, b = store.load(ids[0]), memory.load(ids[1])
    assert texts(a) == texts(b) and a.position == b.position
