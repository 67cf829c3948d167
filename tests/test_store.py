"""The SQLite story store, against real files and processes: history, undo and redo,
durability, damaged and foreign files, hostile text, export and import, concurrency."""

from __future__ import annotations

import ctypes
import json
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

from weave.session import BookError, MemoryBook, title_for
from weave.store import (
    FILE_NAME,
    BadImport,
    DamagedStory,
    DatabaseLocked,
    InvalidInput,
    NewerDatabase,
    NotDeleted,
    NotLoomDatabase,
    StorageUnwritable,
    Store,
    StoreError,
    StoryNotFound,
    StoryStore,
)

ROOT = Path(__file__).resolve().parent.parent
WRITER = ROOT / "tests" / "store_writer.py"
VOLATILE = ("id", "updated_at", "exported_at")  # what an export→import→export may change
HOSTILE = {
    "100k": ("long line, 🐉 and e\u0301. " * 4000)[:100_000],
    "emoji": "🐉 dragons 👩\u200d👩\u200d👧 and 🇫🇷 🏳️\u200d🌈",
    "combining": "e\u0301 a\u0308 Z\u0351\u0352\u0353 n\u0303",
    "rtl": "שלום עולם مرحبا \u202eRTL override\u202c \u200f",
    "nul": "nul\x00byte\x00",
    "lone surrogates": "lone \ud800 surrogate \udfff end\udbff",
    "split pair": "\ud83d\ude00 is two code points, not 😀",
    "controls": "\ufeffBOM, CR\r\nLF, \u2028, \x1b[31m, \x7f",
    "quotes": "quotes \" ' \\ <>& {braces} `ticks` # heading",
}


def texts(states) -> list[str]:
    return [s.text for s in states]


def without(export: str) -> dict:
    data = json.loads(export)
    for key in VOLATILE:
        data.pop(key)
    return data


def run_writer(folder: Path, story_id: str, tag: str, *args: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(folder), story_id, tag, *map(str, args)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


# -- history, undo, redo ------------------------------------------------------------------
def test_every_change_appends_a_version_and_nothing_is_rewritten(tmp_path):
    store = StoryStore(tmp_path)
    sid = store.create("Once")
    seen = []
    for action in (
        lambda: store.save(sid, "Once upon", token_ids=[5, 6], model="m", kind="accept"),
        lambda: store.undo(sid),
        lambda: store.redo(sid),
        lambda: store.undo(sid),
        lambda: store.save(sid, "Once more"),
    ):
        seen = store.history(sid)
        action()
        assert store.history(sid)[: len(seen)] == seen  # earlier versions stay as they were
    history = store.history(sid)
    assert [s.kind for s in history] == ["create", "accept", "undo", "redo", "undo", "edit"]
    assert [s.version for s in history] == list(range(6))
    assert texts(history) == ["Once", "Once upon", "Once", "Once upon", "Once", "Once more"]
    assert store.info(sid).history_len == 6 == store.get(sid).version + 1
    with sqlite3.connect(tmp_path / FILE_NAME) as db:  # the database itself refuses rewrites
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute("UPDATE log SET text = x'00' WHERE story_id = ?", (sid,))
        with pytest.raises(sqlite3.IntegrityError, match="only a deleted story"):
            db.execute("DELETE FROM log WHERE story_id = ?", (sid,))


def test_undo_and_redo_walk_the_branch_and_a_new_edit_drops_redo(tmp_path):
    store = StoryStore(tmp_path)
    sid = store.create("a")
    store.save(sid, "ab")
    store.save(sid, "abc")
    assert store.can_undo(sid) and not store.can_redo(sid) and store.redo(sid) is None
    assert store.undo(sid).text == "ab"
    assert store.undo(sid).text == "a"
    assert not store.can_undo(sid) and store.undo(sid) is None
    assert store.redo(sid).text == "ab" and store.can_redo(sid)
    timeline = store.timeline(sid)
    assert texts(timeline.states) == ["a", "ab", "abc"] and timeline.position == 1
    store.save(sid, "ab!")  # an edit after undo branches: "abc" is no longer redone
    assert not store.can_redo(sid) and store.redo(sid) is None
    assert texts(store.timeline(sid).states) == ["a", "ab", "ab!"]
    assert [store.undo(sid).text, store.undo(sid).text] == ["ab", "a"]
    assert store.redo(sid).text == "ab" and store.redo(sid).text == "ab!"
    assert "abc" in texts(store.history(sid))  # the abandoned state is still in the log


def test_a_save_equal_to_the_current_state_writes_nothing(tmp_path):
    store = StoryStore(tmp_path)
    sid = store.create("x", token_ids=[1], model="m")
    same = store.save(sid, "x", token_ids=[1], model="m")
    assert same.version == 0 and same.kind == "create" and store.info(sid).history_len == 1
    assert store.save(sid, "x", token_ids=[2], model="m").version == 1  # other ids: a new state
    assert store.save(sid, "x", token_ids=[2], model="other").version == 2  # ids of another model


def test_token_ids_and_model_come_back_with_their_state(tmp_path):
    store = StoryStore(tmp_path)
    sid = store.create("The fox", token_ids=(10, 11), model="smollm2")
    accepted = store.save(
        sid, "The fox ran", token_ids=[10, 11, 12], model="smollm2", kind="accept"
    )
    assert accepted.token_ids == (10, 11, 12) and accepted.model == "smollm2"
    store.save(sid, "The fox ran away")  # a typed edit: no ids
    assert store.get(sid).token_ids is None
    back = store.undo(sid)
    assert (back.text, back.token_ids, back.model, back.kind) == (
        "The fox ran",
        (10, 11, 12),
        "smollm2",
        "undo",
    )
    assert store.undo(sid).token_ids == (10, 11)


def test_reopening_after_a_process_restart_finds_everything(tmp_path):
    script = """
import sys
from weave.store import StoryStore
store = StoryStore(sys.argv[1])
sid = store.create("The forest")
store.save(sid, "The forest seemed darker", token_ids=[1, 2, 3], model="m", kind="accept")
store.save(sid, "The forest seemed darker still")
store.undo(sid)
store.rename(sid, "Elis")
store.save_settings(sid, {"cutoff": 0.1})
store.save_tree(sid, {"tree": {"children": [], "logprob": -0.5}})
print(sid)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    sid = done.stdout.strip()
    store = StoryStore(tmp_path)  # a new process's store on the same file
    now = store.get(sid)
    assert (now.text, now.token_ids, now.kind) == ("The forest seemed darker", (1, 2, 3), "undo")
    assert store.can_redo(sid) and store.redo(sid).text == "The forest seemed darker still"
    assert store.info(sid).title == "Elis"
    assert store.load_settings(sid) == {"cutoff": 0.1}
    assert store.load_tree(sid) == {"tree": {"children": [], "logprob": -0.5}}


# -- the list of stories --------------------------------------------------------------------
def test_titles_list_rename_delete_restore_purge(tmp_path):
    store = StoryStore(tmp_path)
    first = store.create("")
    second = store.create("second story")
    store.save(first, "  Once   upon\na time  ")
    store.save(first, "Something else entirely")
    assert [i.id for i in store.list_stories()] == [first, second]  # last edited first
    assert store.info(first).title == "Once upon a time"  # its first words, not its latest
    store.rename(first, "My fox tale")
    assert store.info(first).title == "My fox tale"
    store.rename(first, "   ")
    assert store.info(first).title == "Once upon a time"
    store.save_settings(second, {"cutoff": 0.2})  # not an edit: the order stays
    assert [i.id for i in store.list_stories()] == [first, second]
    store.delete(second)
    assert [i.id for i in store.list_stories()] == [first]
    assert [(i.id, i.deleted) for i in store.list_stories(include_deleted=True)] == [
        (first, False), (second, True)
    ]  # fmt: skip
    assert store.get(second).text == "second story"  # deleted is kept
    with pytest.raises(NotDeleted, match="only a deleted story can be purged"):
        store.purge(first)
    store.restore(second)
    assert {i.id for i in store.list_stories()} == {first, second}


def test_purge_removes_the_text_for_real(tmp_path):
    store = StoryStore(tmp_path)
    keep = store.create("kept story")
    marker = "purple-elephant-7319 " * 50
    sid = store.create(marker)
    store.save(sid, marker + "more")
    store.delete(sid)
    store.purge(sid)
    assert [i.id for i in store.list_stories(include_deleted=True)] == [keep]
    with pytest.raises(StoryNotFound, match=f"no story {sid}"):
        store.get(sid)
    on_disk = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"purple-elephant-7319" not in on_disk
    assert store.get(keep).text == "kept story"


def test_settings_and_tree_are_the_latest_per_story(tmp_path):
    store = StoryStore(tmp_path)
    a, b = store.create("a"), store.create("b")
    assert store.load_settings(a) == {} and store.load_tree(a) is None
    store.save_settings(a, {"cutoff": 0.1, "max_depth": 12, "name": "\ud800 odd"})
    store.save_settings(a, {"cutoff": 0.3})
    tree = {"token_id": None, "children": [{"token_id": 7, "logprob": -2.5}]}
    store.save_tree(b, tree)
    for number in (float("nan"), float("-inf")):  # not JSON: refused, the tree kept
        with pytest.raises(InvalidInput, match="not JSON compliant"):
            store.save_tree(b, {"token_id": None, "children": [{"logprob": number}]})
    assert store.load_settings(a) == {"cutoff": 0.3} and store.load_settings(b) == {}
    assert store.load_tree(b) == tree and store.load_tree(a) is None
    store.save_tree(b, None)
    assert store.load_tree(b) is None


def test_a_damaged_story_entry_is_named_and_the_others_still_open(tmp_path):
    store = StoryStore(tmp_path)
    good, bad = store.create("good"), store.create("bad")
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute("UPDATE stories SET settings = '{broken' WHERE id = ?", (bad,))
    with pytest.raises(DamagedStory, match=f"story {bad} cannot be read: its settings"):
        store.load_settings(bad)
    assert Store(tmp_path).load(good).history[0].text == "good"
    with pytest.raises(BookError, match="cannot be read"):  # what the page reports
        Store(tmp_path).load(bad)
    assert {i.id for i in store.list_stories()} == {good, bad}


# -- durability -------------------------------------------------------------------------------
def test_a_killed_writer_leaves_the_last_committed_state(tmp_path):
    sid = StoryStore(tmp_path).create("start")
    writer = run_writer(tmp_path, sid, "w", 1_000_000, 50_000)
    last = 0
    for line in writer.stdout:
        last = int(line)
        if last >= 40:
            break
    os.kill(writer.pid, signal.SIGKILL)  # most likely in the middle of its next save
    writer.wait()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = StoryStore(tmp_path)
    history = store.history(sid)
    count = len(history) - 1
    assert count >= last  # everything it reported as saved is there, in order, whole
    assert texts(history) == ["start"] + [f"w {i} " + "x" * 50_000 for i in range(1, count + 1)]
    assert store.get(sid).token_ids == (count, count + 1)
    assert store.save(sid, "after the crash").version == count + 1


def test_two_processes_writing_one_story_lose_nothing(tmp_path):
    sid = StoryStore(tmp_path).create("start")
    writers = [run_writer(tmp_path, sid, tag, 30, 1000) for tag in ("a", "b")]
    for w in writers:
        w.communicate()
        assert w.returncode == 0
    history = StoryStore(tmp_path).history(sid)
    assert len(history) == 61
    for tag in ("a", "b"):
        numbers = [int(s.text.split()[1]) for s in history if s.text.startswith(tag + " ")]
        assert numbers == list(range(1, 31))


def test_four_threads_keep_their_own_stories(tmp_path):
    stores = [StoryStore(tmp_path), StoryStore(tmp_path)]  # shared and separate instances
    ids = [stores[0].create(f"story {n}") for n in range(4)]
    errors = []

    def write(n: int) -> None:
        try:
            for i in range(25):
                stores[n % 2].save(ids[n], f"story {n} step {i}", token_ids=[n, i])
                if i % 5 == 4:
                    stores[n % 2].undo(ids[n])
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n, sid in enumerate(ids):
        written = [s for s in stores[0].history(sid) if s.kind == "edit"]
        assert texts(written) == [f"story {n} step {i}" for i in range(25)]
        assert all(s.token_ids == (n, i) for i, s in enumerate(written))


_CREATE = """
import sys
from weave.store import StoryStore
store = StoryStore(sys.argv[1])
store.save(store.create(sys.argv[2]), sys.argv[2] + " saved")
"""


def test_processes_opening_a_new_folder_at_once_share_one_database(tmp_path):
    folder = tmp_path / "new"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    starts = [
        subprocess.Popen([sys.executable, "-c", _CREATE, str(folder), f"p{n}"], env=env,
                         stderr=subprocess.PIPE, text=True)
        for n in range(6)
    ]  # fmt: skip
    for p in starts:
        assert p.wait() == 0, p.stderr.read()
    store = StoryStore(folder)
    assert sorted(store.get(i.id).text for i in store.list_stories()) == [
        f"p{n} saved" for n in range(6)
    ]


def test_an_empty_file_is_taken_as_a_new_database(tmp_path):
    (tmp_path / FILE_NAME).write_bytes(b"")
    store = StoryStore(tmp_path)
    assert store.get(store.create("x")).text == "x"


def test_a_locked_database_is_a_clear_error_and_loses_nothing(tmp_path, monkeypatch):
    store = StoryStore(tmp_path)
    sid = store.create("x")
    monkeypatch.setattr("weave.store.BUSY_MS", 200)
    holder = sqlite3.connect(tmp_path / FILE_NAME, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(DatabaseLocked, match="stayed locked by another program for 200 ms"):
            store.save(sid, "y")
        with pytest.raises(DatabaseLocked):
            StoryStore(tmp_path)
        assert store.get(sid).text == "x"  # readers go on while a writer holds the lock
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.save(sid, "y").text == "y"
    assert texts(store.history(sid)) == ["x", "y"]


# -- files that are not ours, and folders we cannot write -------------------------------------
def _damaged(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[4096 : 4096 + 64] = b"\xa5" * 64  # page 2: a table's b-tree page
    path.write_bytes(bytes(data))


def _newer(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")


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
    ],
    ids=["junk", "foreign sqlite", "damaged page", "truncated", "newer schema"],
)  # fmt: skip
def test_a_file_that_is_not_ours_or_is_damaged_is_left_untouched(tmp_path, spoil, error, message):
    path = tmp_path / FILE_NAME
    if spoil.__name__.startswith("_"):  # spoil a real store of ours
        store = StoryStore(tmp_path)
        for _ in range(5):
            store.save(store.create("y" * 10_000), "z" * 20_000)
        del store
        assert sorted(os.listdir(tmp_path)) == [FILE_NAME]  # all connections closed
    spoil(path)
    before = path.read_bytes()
    with pytest.raises(error, match=message):
        StoryStore(tmp_path)
    with pytest.raises(BookError):  # the page's book fails the same way
        Store(tmp_path)
    assert path.read_bytes() == before
    assert not any(name.endswith("-backup") for name in os.listdir(tmp_path))


_OPEN = """
import sys
from weave.store import StoryStore, StoreError
try:
    StoryStore(sys.argv[1])
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
            preexec_fn=_without_permission_overrides, capture_output=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    except subprocess.SubprocessError as e:
        pytest.skip(f"cannot run a process that permissions apply to: {e}")
    return done.stdout.strip()


def test_a_read_only_data_folder_is_a_clear_error(tmp_path):
    empty, saved = tmp_path / "empty", tmp_path / "saved"
    empty.mkdir()
    StoryStore(saved).create("kept")
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
        StoryStore(blocked / "data")


# -- hostile text, export and import ------------------------------------------------------------
@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_round_trips_exactly(tmp_path, text):
    store = StoryStore(tmp_path)
    sid = store.create(text, token_ids=[1, 2], model=f"model {text[:20]}")
    store.save(sid, text + text[:10], kind="accept")
    store.rename(sid, text[:60])
    store.save_settings(sid, {"note": text[:200], text[:20]: 1})
    again = StoryStore(tmp_path)  # through the file, not a cache
    assert texts(again.history(sid)) == [text, text + text[:10]]
    assert again.history(sid)[0].model == f"model {text[:20]}"
    assert again.info(sid).title == text[:60]
    assert again.load_settings(sid) == {"note": text[:200], text[:20]: 1}
    assert again.export_text(sid) == text + text[:10]
    full = text + text[:10]
    assert again.export_markdown(sid).endswith(full if full.endswith("\n") else full + "\n")
    exported = again.export_json(sid)
    assert exported.isascii()
    copy = again.import_json(exported)
    assert texts(again.history(copy)) == texts(again.history(sid))
    assert without(again.export_json(copy)) == without(exported)


def test_the_untitled_title_is_the_first_words_of_a_long_text(tmp_path):
    store = StoryStore(tmp_path)
    text = "🐉" * 2000 + " tail"  # its first bytes end inside a character
    assert store.info(store.create(text)).title == title_for(text)


def test_export_then_import_then_export_gives_the_same_json(tmp_path):
    store = StoryStore(tmp_path)
    sid = store.create("Once", token_ids=[1], model="m")
    store.save(sid, "Once upon", token_ids=[1, 2], model="m", kind="accept")
    store.save(sid, "Once upon a time")
    store.undo(sid)
    store.undo(sid)
    store.redo(sid)
    store.save(sid, "Once upon, again")  # a branch
    store.undo(sid)
    store.rename(sid, "Fox")
    store.save_settings(sid, {"cutoff": 0.1, "score": "joint"})
    tree = {"children": [{"token_id": 3, "logprob": -1.25, "p": 0.2865}], "logprob": 0.0}
    store.save_tree(sid, tree)
    exported = store.export_json(sid)
    copy = store.import_json(exported)
    assert copy != sid
    assert without(store.export_json(copy)) == without(exported)
    assert store.history(copy) == [
        s.__class__(**{**s.__dict__, "story_id": copy}) for s in store.history(sid)
    ]
    assert store.timeline(copy).position == store.timeline(sid).position
    assert store.can_redo(copy) and store.redo(copy).text == "Once upon, again"
    assert store.info(copy).title == "Fox" and store.load_tree(copy) == tree
    assert json.loads(exported)["history"][0] == {
        "version": 0, "kind": "create", "created_at": store.history(sid)[0].created_at,
        "parent": None, "text": "Once", "token_ids": [1], "model": "m",
    }  # fmt: skip


def _export_with(**changes) -> str:
    doc = {
        "format": "lloom-story", "version": 1, "title": None, "created_at": 1.0,
        "settings": {}, "tree": None,
        "history": [
            {"version": 0, "kind": "create", "created_at": 1.0, "parent": None, "text": "a",
             "token_ids": None, "model": None},
            {"version": 1, "kind": "edit", "created_at": 2.0, "parent": 0, "text": "ab",
             "token_ids": None, "model": None},
        ],
    }  # fmt: skip
    for key, value in changes.items():
        if key.startswith("row1_"):
            doc["history"][1][key[5:]] = value
        else:
            doc[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"not json", "it is not JSON"),
        (b"\xff\xfe", "it is not JSON"),
        ('{"format": "lloom-session"}', 'no "format": "lloom-story"'),
        (_export_with(version=2), "version 2; this LLooM reads version 1"),
        (_export_with(history=[]), "has no history"),
        (_export_with(row1_kind="rewrite"), "unknown kind 'rewrite'"),
        (_export_with(row1_kind="create"), "cannot be of kind 'create'"),
        (_export_with(row1_parent=5), "not made from the state before it"),
        (_export_with(row1_text=None), "the text must be a str"),
        (_export_with(row1_token_ids=["1"]), "token ids must be non-negative ints"),
        (_export_with(row1_created_at="noon"), "is not a time"),
        (_export_with(row1_version=7), "not an object with version 1"),
        (_export_with(row1_kind="redo", row1_state=0), "does not move forward"),
        (_export_with(settings=[1]), "settings must be an object"),
    ],
)
def test_a_bad_import_is_a_named_error_and_creates_nothing(tmp_path, data, message):
    store = StoryStore(tmp_path)
    with pytest.raises(BadImport, match=message):
        store.import_json(data)
    assert store.list_stories(include_deleted=True) == []
    assert StoryStore(tmp_path).import_json(_export_with())  # the unspoilt one imports


def test_bad_arguments_are_named_errors(tmp_path):
    store = StoryStore(tmp_path)
    sid = store.create("x")
    for call, error, message in [
        (lambda: store.save(sid, "y", kind="undo"), InvalidInput, "kind must be one of"),
        (lambda: store.create("y", kind="edit"), InvalidInput, "kind must be one of"),
        (lambda: store.save(sid, b"y"), InvalidInput, "the text must be a str"),
        (lambda: store.save(sid, "y", token_ids=[True]), InvalidInput, "non-negative ints"),
        (lambda: store.save(sid, "y", token_ids=[-1]), InvalidInput, "non-negative ints"),
        (lambda: store.save(sid, "y", token_ids="12"), InvalidInput, "a list of ints"),
        (lambda: store.save(sid, "y", model=3), InvalidInput, "the model must be a str"),
        (lambda: store.save_settings(sid, {"x": {1, 2}}), InvalidInput, "cannot be saved as JSON"),
        (lambda: store.save_tree(sid, [1]), InvalidInput, "a tree must be a mapping"),
        (lambda: store.get(42), InvalidInput, "a story id is a str"),
        (lambda: store.get("nope"), StoryNotFound, "no story nope"),
        (lambda: store.save("nope", "y"), StoryNotFound, "no story nope"),
        (lambda: store.undo("nope"), StoryNotFound, "no story nope"),
        (lambda: store.rename("nope", "t"), StoryNotFound, "no story nope"),
        (lambda: store.delete("nope"), StoryNotFound, "no story nope"),
        (lambda: store.export_json("nope"), StoryNotFound, "no story nope"),
    ]:
        with pytest.raises(error, match=message):
            call()
        assert issubclass(error, StoreError)
    assert texts(store.history(sid)) == ["x"]


# -- the schema's migration ---------------------------------------------------------------------
V1_SCHEMA = """
CREATE TABLE stories (id TEXT PRIMARY KEY, title BLOB NOT NULL, created REAL NOT NULL,
    updated REAL NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, tip INTEGER NOT NULL,
    current INTEGER NOT NULL, settings TEXT NOT NULL DEFAULT '{}', search TEXT);
CREATE TABLE changes (story_id TEXT NOT NULL REFERENCES stories(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, parent INTEGER, text BLOB NOT NULL, kind TEXT NOT NULL,
    created REAL NOT NULL, PRIMARY KEY (story_id, seq));
PRAGMA application_id = 1282371437;
PRAGMA user_version = 1;
PRAGMA journal_mode = WAL;
"""


def test_a_schema_1_database_is_migrated_with_a_backup(tmp_path):
    path = tmp_path / FILE_NAME
    with sqlite3.connect(path) as db:
        db.executescript(V1_SCHEMA)
        db.execute("INSERT INTO stories VALUES ('s1', ?, 1, 5, 0, 2, 1, '{\"cutoff\": 0.1}', "
                   "'{\"tree\": 1}')", (title_for("Once").encode(),))  # fmt: skip
        for seq, parent, text, kind in [(0, None, "Once", "start"), (1, 0, "Once upon", "accept"),
                                        (2, 1, "Once upon a time", "edit")]:  # fmt: skip
            db.execute("INSERT INTO changes VALUES ('s1', ?, ?, ?, ?, ?)",
                       (seq, parent, text.encode("utf-8", "surrogatepass"), kind, seq))  # fmt: skip
        db.execute("INSERT INTO stories VALUES ('s2', ?, 2, 9, 1, 2, 2, '{}', NULL)",
                   ("Elis \ud800".encode("utf-8", "surrogatepass"),))  # fmt: skip
        for seq, parent, text in [(0, None, "a"), (1, 0, "ab"), (2, 0, "ac")]:
            db.execute("INSERT INTO changes VALUES ('s2', ?, ?, ?, 'edit', 3)",
                       (seq, parent, text.encode()))  # fmt: skip
    db.close()
    store = StoryStore(tmp_path)
    assert (tmp_path / f"{FILE_NAME}.v1-backup").exists()
    assert [s.kind for s in store.history("s1")] == ["create", "accept", "edit", "undo"]
    assert store.get("s1").text == "Once upon" and store.can_redo("s1")
    assert store.info("s1").title == "Once" and store.info("s1").updated_at == 5
    assert store.load_settings("s1") == {"cutoff": 0.1} and store.load_tree("s1") == {"tree": 1}
    assert texts(store.timeline("s2").states) == ["a", "ac"] and not store.can_redo("s2")
    assert store.info("s2").title == "Elis \ud800" and store.info("s2").deleted
    assert store.redo("s1").text == "Once upon a time"
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2


# -- properties ---------------------------------------------------------------------------------
class Editor:
    """The simple model: a list of states and a position in it."""

    def __init__(self, text: str):
        self.states, self.at = [text], 0

    def save(self, text: str) -> bool:
        if text == self.states[self.at]:
            return False
        del self.states[self.at + 1 :]
        self.states.append(text)
        self.at = len(self.states) - 1
        return True

    def undo(self) -> bool:
        self.at -= self.at > 0
        return True

    def redo(self) -> bool:
        self.at += self.at < len(self.states) - 1
        return True


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.sampled_from(["", "a", "b", "ab", "a\x00", "\ud800"])),
        st.tuples(st.sampled_from(["undo", "redo"])),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(actions=ACTIONS)
def test_undo_and_redo_behave_as_a_list_and_a_position(tmp_path_factory, actions):
    folder = tmp_path_factory.mktemp("prop")
    store, editor = StoryStore(folder), Editor("start")
    sid = store.create("start")
    versions = 1
    for action, *arg in actions:
        could = store.can_undo(sid) if action == "undo" else store.can_redo(sid)
        before = store.history(sid)
        result = getattr(store, action)(sid, *arg)
        changed = getattr(editor, action)(*arg) and (action == "save" or could)
        assert (result is None) == (action != "save" and not could)
        versions += changed
        assert store.history(sid)[: len(before)] == before
        assert store.get(sid).text == editor.states[editor.at]
        assert (store.can_undo(sid), store.can_redo(sid)) == (
            editor.at > 0, editor.at < len(editor.states) - 1
        )  # fmt: skip
    assert store.info(sid).history_len == versions
    reopened = StoryStore(folder)
    timeline = reopened.timeline(sid)
    assert (texts(timeline.states), timeline.position) == (editor.states, editor.at)
    copy = reopened.import_json(reopened.export_json(sid))
    assert reopened.timeline(copy).position == editor.at


BOOK_ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("record"), st.text(max_size=5)),
        st.tuples(st.just("move"), st.integers(0, 8)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(actions=BOOK_ACTIONS)
def test_the_page_book_behaves_as_the_in_memory_book(tmp_path_factory, actions):
    book, memory = Store(tmp_path_factory.mktemp("book")), MemoryBook()
    ids = (book.create("start"), memory.create("start"))
    for action, arg in actions:
        outcomes = []
        for one, sid in zip((book, memory), ids, strict=True):
            try:
                getattr(one, action)(sid, *((arg, "edit") if action == "record" else (arg,)))
                outcomes.append(None)
            except BookError:
                outcomes.append("error")
        assert outcomes[0] == outcomes[1]
    a, b = book.load(ids[0]), memory.load(ids[1])
    assert [(c.text, c.kind) for c in a.history] == [(c.text, c.kind) for c in b.history]
    assert a.position == b.position and a.title == b.title
