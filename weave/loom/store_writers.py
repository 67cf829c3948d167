"""The writers who logged in, and the stories kept for an e-mail address until they do.

A story's owner is a login's key (issuer and subject, `weave.access.Login.writer`), the
local writer, or an e-mail address: a story written before schema 5 (when a login was
named by its address), or given with `loom give` to an address nobody has logged in
with yet. `sign_in` records a login's verified address and hands it the stories its
address owns; `owner_for` is whom `loom give ADDRESS` hands a story to: the one login
with that address, never a guess among several (`SharedAddress` names them, and `loom
give --to ISSUER SUBJECT` names one, `has_logged_in`). Only a verified
address reaches here (`weave.access.login_from` refuses the rest), so an address names a
writer only as far as the provider vouches for it. Each function works inside the
caller's transaction; the owner filter itself is `weave.loom.store_rows`'.
"""

from __future__ import annotations

import sqlite3

from weave.loom.store_errors import SharedAddress


def sign_in(db: sqlite3.Connection, writer: str, email: str, now: float) -> int:
    """Record that `writer` logged in with the verified address `email`, and make theirs
    the stories that address owns. Returns how many were handed over."""
    db.execute(
        "INSERT INTO writers (writer, email, seen) VALUES (?, ?, ?) "
        "ON CONFLICT (writer) DO UPDATE SET email = excluded.email, seen = excluded.seen",
        (writer, email, now),
    )
    return db.execute("UPDATE stories SET owner = ? WHERE owner = ?", (writer, email)).rowcount


def owner_for(db: sqlite3.Connection, email: str) -> str:
    """The owner a story given to `email` gets: the one writer who logged in with that
    address, or, when none has yet, the address itself (theirs at their first login).

    Raises:
        SharedAddress: more than one login has that address (another account, another
            provider's user): naming them, since the store will not guess.
    """
    rows = db.execute(
        "SELECT writer FROM writers WHERE email = ? ORDER BY seen DESC, writer", (email,)
    ).fetchall()
    if len(rows) > 1:
        raise SharedAddress(email, tuple(row["writer"] for row in rows))
    return rows[0]["writer"] if rows else email


def has_logged_in(db: sqlite3.Connection, writer: str) -> bool:
    """Whether the login `writer` (issuer and subject) has logged in here."""
    return db.execute("SELECT 1 FROM writers WHERE writer = ?", (writer,)).fetchone() is not None
