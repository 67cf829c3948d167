"""Who may use the page (`weave.access`), and the store's owner filter (`weave.loom.store`):
each writer's stories are their own, below the page and the session layer."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from tests.older_stores import as_schema
from weave.access import NO_EMAIL, NO_SUBJECT, Login, decide, is_loopback, login_from, writer_for
from weave.interop.files import export_json, import_file
from weave.loom.loom import Loom
from weave.loom.store import LOCAL_WRITER, InvalidInput, LoomStore, StoryNotFound
from weave.loom.store_sql import SCHEMA_VERSION, is_database_url

ALICE, BOB = "alice@example.org", "bob@example.org"


def where_variable(where) -> str:
    """The environment variable that names the store at `where` to the command line."""
    return "LLOOM_DATABASE_URL" if is_database_url(where) else "LLOOM_DATA_DIR"


ISSUER = "https://id.example.org"


def claims(sub: str, email: object = ALICE, verified: object = True) -> dict:
    """An ID token's claims as `st.user` holds them."""
    return {"iss": ISSUER, "sub": sub, "email": email, "email_verified": verified}


@pytest.mark.parametrize(
    "address, local",
    [("127.0.0.1", True), ("127.8.9.1", True), ("localhost", True), ("::1", True),
     ("[::1]", True), ("unix://run/lloom.sock", True), ("", False), ("0.0.0.0", False),
     ("::", False), ("192.168.1.20", False), ("my-laptop", False)],
)  # fmt: skip
def test_only_loopback_addresses_are_this_machine_only(address, local):
    assert is_loopback(address) is local


def test_on_loopback_without_login_the_page_is_the_local_writers():
    verdict = decide(address="127.0.0.1", login=False, open_page=False, logged_in=False,
                     claims=None)  # fmt: skip
    assert verdict.writer == LOCAL_WRITER and not verdict.ask_login and verdict.refusal is None


@pytest.mark.parametrize("address", ["", "0.0.0.0", "192.168.1.20"])
def test_beyond_loopback_without_login_the_page_is_nobodys_and_says_how_to_share(address):
    verdict = decide(address=address, login=False, open_page=False, logged_in=False, claims=None)
    assert verdict.writer is None and not verdict.ask_login
    assert "[auth]" in verdict.refusal and "[sharing] open = true" in verdict.refusal
    opened = decide(address=address, login=False, open_page=True, logged_in=False, claims=None)
    assert opened.writer == LOCAL_WRITER


def test_through_a_reverse_proxy_loopback_is_no_longer_this_machine_only():
    verdict = decide(address="127.0.0.1", proxied=True, login=False, open_page=False,
                     logged_in=False, claims=None)  # fmt: skip
    assert verdict.writer is None and "through a proxy" in verdict.refusal


@pytest.mark.parametrize("address", ["127.0.0.1", "0.0.0.0"])
def test_with_login_configured_a_writer_is_the_provider_and_subject(address):
    asked = decide(address=address, login=True, open_page=True, logged_in=False, claims=None)
    assert asked.writer is None and asked.ask_login
    verdict = decide(address=address, login=True, open_page=False, logged_in=True,
                     claims=claims("u-123", " Alice@Example.org "))  # fmt: skip
    assert verdict.login == Login(ISSUER, "u-123", ALICE)
    assert verdict.writer == f"{ISSUER} u-123" != ALICE
    for email in (None, "", "local", "@", "a b@c.org", 7):
        refused = decide(address=address, login=True, open_page=False, logged_in=True,
                         claims=claims("u-123", email))  # fmt: skip
        assert refused.writer is None and refused.refusal == NO_EMAIL


@pytest.mark.parametrize("verified", [False, None, "false", 1, "yes"])
def test_an_address_the_provider_did_not_verify_names_nobody(verified):
    """Issue 31: `email: alice@..., email_verified: false` was Alice."""
    refused = decide(address="127.0.0.1", login=True, open_page=False, logged_in=True,
                     claims=claims("mallory", ALICE, verified))  # fmt: skip
    assert refused.writer is None and refused.login is None
    assert "has not verified the e-mail address `alice@example.org`" in refused.refusal
    unsaid = claims("mallory")
    del unsaid["email_verified"]
    assert isinstance(login_from(unsaid), str)
    assert isinstance(login_from(claims("alice", ALICE, "True")), Login)  # some send text


def test_a_login_without_issuer_or_subject_names_nobody():
    for missing in ("iss", "sub"):
        given = claims("u-123")
        given[missing] = ""
        assert login_from(given) == NO_SUBJECT


def test_an_address_is_never_the_local_writer():
    assert writer_for(LOCAL_WRITER) is None and writer_for("Bob@Example.org") == BOB


# -- the store: each writer's stories are their own ----------------------------------------
def test_each_writer_lists_opens_and_changes_only_their_own_stories(stories_at):
    store = LoomStore(stories_at)
    alice, bob = store.as_writer(ALICE), LoomStore(stories_at, writer=BOB)
    mine, _ = alice.create("Alice's garden.")
    theirs, _ = bob.create("Bob's harbour.")
    local, _ = store.create("A draft before login.")
    assert [s.id for s in alice.stories()] == [mine]
    assert [s.id for s in bob.stories()] == [theirs]
    assert [s.id for s in store.stories()] == [local]
    for action in (
        lambda: bob.load(mine), lambda: bob.info(mine), lambda: export_json(bob, mine),
        lambda: bob.settings(mine), lambda: bob.suggestions(mine, "x"),
        lambda: bob.rename(mine, "mine now"), lambda: bob.delete(mine),
        lambda: bob.save_settings(mine, {"cutoff": 0.5}),
        lambda: bob.update(mine, lambda loom: loom.bookmark(loom.cursor, True)),
        lambda: bob.give(mine, BOB),
    ):  # fmt: skip
        with pytest.raises(StoryNotFound):
            action()
    assert alice.load(mine).text() == "Alice's garden." and not alice.info(mine).deleted
    assert alice.info(mine).title == "Alice's garden."


def test_an_import_is_the_importers_and_a_story_can_be_given_to_a_login(stories_at):
    store = LoomStore(stories_at)
    draft, _ = store.create("A draft before login.")
    bob = store.as_writer(BOB)
    copy = import_file(bob, export_json(store, draft))[0]
    assert [s.id for s in bob.stories()] == [copy] and [s.id for s in store.stories()] == [draft]
    store.give(draft, ALICE)
    assert store.stories() == [] and [s.id for s in store.as_writer(ALICE).stories()] == [draft]
    with pytest.raises(InvalidInput):
        store.as_writer(ALICE).give(draft, " ")


def test_a_schema_3_file_gains_owners_and_its_stories_are_the_local_writers(tmp_path):
    store = LoomStore(tmp_path)
    story_id, _ = store.create("Written before login existed.")
    as_schema(store.path, 3)  # no owner, no provenance
    reopened = LoomStore(tmp_path)
    assert [s.id for s in reopened.stories()] == [story_id]
    assert isinstance(reopened.load(story_id), Loom)
    assert reopened.as_writer(ALICE).stories() == []
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


def test_a_schema_4_address_keeps_its_stories_until_its_verified_writer_logs_in(tmp_path):
    """Issue 31: stories were keyed by e-mail address; now by issuer and subject. A file
    of then keeps every story, each handed to the login of its address when it comes."""
    store = LoomStore(tmp_path)
    garden, _ = store.as_writer(ALICE).create("Alice's garden.")
    shed, _ = store.as_writer(ALICE).create("Alice's shed.")
    harbour, _ = store.as_writer(BOB).create("Bob's harbour.")
    draft, _ = store.create("A draft before login.")
    as_schema(store.path, 4)  # owners named by address, no writers, no provenance
    reopened = LoomStore(tmp_path)
    alice = Login(ISSUER, "u-alice", ALICE)
    mine = reopened.as_writer(alice.writer)
    assert mine.stories() == []  # not before the login
    assert mine.sign_in(alice.email) == 2
    assert {s.id for s in mine.stories()} == {garden, shed}
    assert mine.load(garden).text() == "Alice's garden."
    assert reopened.as_writer(ALICE).stories() == []  # the address alone no longer opens them
    assert mine.sign_in(alice.email) == 0  # once
    assert [s.id for s in reopened.as_writer(BOB).stories()] == [harbour]  # Bob's wait for him
    assert [s.id for s in reopened.stories()] == [draft]
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


def test_a_story_given_to_an_address_goes_to_the_writer_who_logged_in_with_it(stories_at):
    store = LoomStore(stories_at)
    alice = Login(ISSUER, "u-alice", ALICE)
    before, _ = store.create("Given before Alice's first login.")
    store.give(before, ALICE)
    mine = store.as_writer(alice.writer)
    mine.sign_in(ALICE)
    after, _ = store.create("Given after it.")
    store.give(after, ALICE)
    assert {s.id for s in mine.stories()} == {before, after}
    assert store.as_writer(ALICE).stories() == []


def test_loom_give_hands_a_pre_login_story_to_a_login(stories_at):
    store = LoomStore(stories_at)
    draft, _ = store.create("A draft before login.")

    def loom(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "weave", "loom", *args], capture_output=True, text=True,
            env={**os.environ, where_variable(stories_at): str(stories_at)}, timeout=60,
        )  # fmt: skip

    done = loom("give", draft, "Alice@Example.org")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{draft} is now {ALICE}'s"
    assert [s.id for s in store.as_writer(ALICE).stories()] == [draft]
    assert json.loads(loom("list", "--json").stdout) == []  # gone from this machine's list
    again = loom("give", draft, BOB)  # not the local writer's any more
    assert again.returncode == 2 and again.stderr.startswith(f"error: no story {draft}")
    kept, _ = store.create("Another draft.")
    wrong = loom("give", kept, "alice")
    assert wrong.returncode == 2 and "'alice' is not an e-mail address" in wrong.stderr
    assert [s.id for s in store.stories()] == [kept]


def test_loom_give_to_an_address_two_logins_share_refuses_and_names_them(stories_at):
    store = LoomStore(stories_at)
    alice = Login(ISSUER, "u-alice", ALICE)
    other = Login("https://github.com", "4242", ALICE)  # another provider, the same address
    store.as_writer(alice.writer).sign_in(ALICE)
    store.as_writer(other.writer).sign_in(ALICE)
    draft, _ = store.create("Whose is it?")

    def loom(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "weave", "loom", *args], capture_output=True, text=True,
            env={**os.environ, where_variable(stories_at): str(stories_at)}, timeout=60,
        )  # fmt: skip

    refused = loom("give", draft, ALICE)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"error: {ALICE} is the verified address of 2 logins: {other.writer}; {alice.writer}; "
        "give the story to one with --to ISSUER SUBJECT\n"
    )
    assert [s.id for s in store.stories()] == [draft]  # still the local writer's
    unknown = loom("give", draft, "--to", ISSUER, "u-nobody")
    assert unknown.returncode == 2 and "has logged in here" in unknown.stderr
    done = loom("give", draft, "--to", ISSUER, "u-alice")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{draft} is now {alice.writer}'s"
    assert [s.id for s in store.as_writer(alice.writer).stories()] == [draft]
    assert store.as_writer(other.writer).stories() == []
