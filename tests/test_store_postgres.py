"""The story store on a real PostgreSQL server, in what only a server can do: go down, turn
read-only, refuse a login, fill its disk, hold a schema LLooM did not make. Each is one
line naming it, with no password in it, and nothing the writer did is lost: a move made
while the server is down waits in the tab and is saved, in order, once it is back.

The disruptive tests run on a server of this module's own (`lonely`), stopped and
started again; the store's other guarantees are `tests/test_store.py`'s, run on both
databases.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.postgres_server import PASSWORD, USER, admin, database, postgres_server
from tests.raw_sql import another_program
from weave.desk.session import Workspace
from weave.loom.store import LoomStore
from weave.loom.store_errors import (
    DatabaseUnavailable,
    LoginRefused,
    NewerDatabase,
    NotLoomDatabase,
    StorageFailed,
    StorageUnwritable,
)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lonely():
    """A PostgreSQL server for this module alone: its tests stop it and make it read-only."""
    with postgres_server() as server:
        yield server


def one_line(error: BaseException | str) -> str:
    text = str(error)
    assert "\n" not in text and PASSWORD not in text, text
    return text


@pytest.mark.parametrize(
    "spoil, error, message",
    [
        ("CREATE SCHEMA lloom; CREATE TABLE lloom.notes (x INTEGER)", NotLoomDatabase,
         "has a schema 'lloom' that LLooM did not make; it was left untouched"),
        ("UPDATE lloom.meta SET version = 99", NewerDatabase,
         r"written by a newer LLooM \(schema 99, this one reads 7\); it was left untouched"),
        ("UPDATE lloom.meta SET version = 2", NotLoomDatabase,
         "has schema 2, from a development build .* left untouched"),
    ],
    ids=["foreign schema", "newer", "older"],
)  # fmt: skip
def test_a_database_that_is_not_ours_is_left_untouched(postgres, spoil, error, message):
    with database(postgres) as url:
        if spoil.startswith("UPDATE"):
            LoomStore(url).create("a story of ours")
        with another_program(url) as run:
            for statement in spoil.split("; "):
                run(statement)
            before = run("SELECT table_name FROM information_schema.tables "
                         "WHERE table_schema = 'lloom' ORDER BY 1")  # fmt: skip
        with pytest.raises(error, match=message):
            LoomStore(url)
        with another_program(url) as run:
            assert run("SELECT table_name FROM information_schema.tables "
                       "WHERE table_schema = 'lloom' ORDER BY 1") == before  # fmt: skip


def test_other_programs_tables_stay_beside_lloom_s_own(postgres):
    with database(postgres) as url:
        with another_program(url) as run:
            run("CREATE TABLE public.stories (id INTEGER, title TEXT)")
            run("INSERT INTO public.stories VALUES (1, 'another program''s')")
        store = LoomStore(url)
        sid, _ = store.create("LLooM's own story.")
        assert [s.id for s in store.stories()] == [sid]
        with another_program(url) as run:
            assert run("SELECT * FROM public.stories") == [(1, "another program's")]


def test_a_server_that_goes_down_is_one_line_and_the_moves_made_meanwhile_wait(lonely):
    with database(lonely) as url:
        ws = Workspace(LoomStore(url, busy_ms=1000))
        assert ws.start("Once upon a time,")
        lonely.stop()
        try:
            ws.edit("Once upon a time, there was")
            ws.edit("Once upon a time, there was a fox")
            assert "cannot be reached" in one_line(ws.save_error)
            assert ws.text == "Once upon a time, there was a fox" and len(ws.pending) == 2
            with pytest.raises(DatabaseUnavailable, match="check that the server is running"):
                LoomStore(url, busy_ms=1000)
        finally:
            lonely.start()
        ws.refresh()  # the next rerun saves what waited, in order
        assert ws.save_error is None and not ws.pending
        loom = LoomStore(url).load(ws.story_id)
        assert loom.text() == "Once upon a time, there was a fox"
        assert [n.text for n in loom.path()[1:]] == ["Once upon a time,", " there was", " a fox"]


def test_a_read_only_server_is_one_line_at_opening_and_at_a_move_and_loses_nothing(lonely):
    with database(lonely) as url:
        store = LoomStore(url)
        sid, _ = store.create("kept")
        admin(
            lonely, "ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()"
        )
        try:
            with pytest.raises(
                StorageUnwritable, match="is read-only .* check that the server"
            ) as e:
                for _ in range(
                    50
                ):  # each connection reads the reloaded setting before its next query
                    store.update(sid, lambda lm: lm.accept(" lost?"))
                    time.sleep(0.1)
            one_line(e.value)
            with pytest.raises(StorageUnwritable, match="is read-only"):
                LoomStore(url)
            assert store.load(sid).text().startswith("kept")  # reading goes on
        finally:
            admin(lonely, "SET default_transaction_read_only = off",
                  "ALTER SYSTEM RESET default_transaction_read_only",
                  "SELECT pg_reload_conf()")  # fmt: skip
        time.sleep(0.5)
        before = store.load(sid).text()
        assert store.update(sid, lambda lm: lm.accept(" saved")).text() == before + " saved"


@pytest.mark.parametrize("who", ["wrong password", "unknown user"])
def test_a_login_the_server_refuses_is_one_line_without_the_password(postgres, who):
    with database(postgres) as url:
        wrong = (url.replace(PASSWORD, "hunter2-wrong") if who == "wrong password"
                 else url.replace("lloom:", "mallory:"))  # fmt: skip
        with pytest.raises(
            LoginRefused, match="refused the login .* check the user and the password"
        ) as e:
            LoomStore(wrong, busy_ms=1000)
        assert "hunter2-wrong" not in one_line(e.value)


@pytest.fixture
def small_disk(postgres):
    """A 2 MiB tmpfs the server keeps a database on (mounting needs root); its mount point."""
    if os.getuid() != 0:
        pytest.skip("mounting a small disk needs root")
    mount = Path(tempfile.mkdtemp(prefix="lloom-small-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)]).returncode:
        mount.rmdir()
        pytest.skip("cannot mount a tmpfs here")
    try:
        subprocess.run(["chown", USER, str(mount)], check=True)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)])
        mount.rmdir()


def test_a_full_disk_is_one_line_and_loses_nothing_saved(postgres, small_disk):
    admin(postgres, f"CREATE TABLESPACE small LOCATION '{small_disk}'")
    admin(
        postgres,
        "CREATE DATABASE full_disk",  # its catalog on the big disk, LLooM's tables not
        "ALTER DATABASE full_disk SET default_tablespace = small",
    )
    url = postgres.url("full_disk")
    try:
        store = LoomStore(url)
        sid, loom = store.create("start")
        saved = 0
        with pytest.raises(StorageFailed, match="is full .* free space on its disk") as e:
            for i in range(200):  # text that does not compress: the disk fills
                loom = store.update(
                    sid, lambda lm, i=i: lm.accept(f" {i}" + os.urandom(96_000).hex())
                )
                saved += 1
        one_line(e.value)
        assert saved > 0 and store.load(sid) == loom  # every move saved before is there
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
        assert store.update(sid, lambda lm: lm.accept(" after")).text().endswith(" after")
    finally:
        from weave.loom.store_pg import StoreServer

        StoreServer(url, 1000).close()
        admin(postgres, "DROP DATABASE full_disk WITH (FORCE)", "DROP TABLESPACE small")


def test_a_page_whose_database_is_down_says_so_once_without_the_password(
    data_dir, fake, monkeypatch, lonely
):
    """The page never falls back to a folder of its own for a group's database (the others
    would not see what it saved): it says so and waits, and the next run finds it back."""
    from streamlit.testing.v1 import AppTest

    with database(lonely) as url:
        monkeypatch.setenv("LLOOM_DATABASE_URL", url)
        lonely.stop()
        try:
            at = AppTest.from_file(str(ROOT / "lloom.py"), default_timeout=60).run()
            assert not at.exception
            (error,) = at.error
            assert "The story database cannot be used" in error.value
            assert "cannot be reached" in error.value and PASSWORD not in error.value
            assert not [b for b in at.button if b.key == "start"]  # no story is begun
        finally:
            lonely.start()
        at.run()
        assert not at.exception and not at.error
        at.button(key="start").click().run()
        assert [s.title for s in LoomStore(url).stories()] == ["Once upon a time,"]
