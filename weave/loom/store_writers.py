"""The writers who logged in, and the stories kept for an e-mail address until they do.

A story's owner is a login's key (issuer and subject, `weave.access.Login.writer`), the
local writer, or an e-mail address: a story written before schema 5 (when a login was
named by its address), or given with `loom give` to an address nobody has logged in
with yet. `sign_in` records a login's verified address and hands it the stories its
address owns, and the shares made to it; `owner_for` is whom `loom give ADDRESS` hands a
story to (and whom sharing it with ADDRESS names): the one login with that address, never
a guess among several (`SharedAddress` names them, and `loom give --to ISSUER SUBJECT`
names one, `has_logged_in`); `email_of` the address that names the writer on the nodes
they add. Only a verified address reaches here (`weave.access.login_from` refuses the
rest), so an address names a writer only as far as the provider vouches for it. Each
function works inside the caller's transaction; the owner filter itself is
`weave.loom.store_rows`'.
"""

from __future__ import annotations

from weave.loom.store_errors import SharedAddress
from weave.loom.store_sql import Db


def sign_in(db: Db, writer: str, email: str, now: float) -> int:
    """Record that `writer` logged in with the verified address `email`, and make theirs
    the stories that address owns and the shares made to it. Returns how many stories
    were handed over."""
    db.execute(
        "INSERT INTO writers (writer, email, seen) VALUES (?, ?, ?) "
        "ON CONFLICT (writer) DO UPDATE SET email = excluded.email, seen = excluded.seen",
        (writer, email, now),
    )
    db.execute("DELETE FROM shares WHERE writer = ? AND story_id IN "
               "(SELECT story_id FROM shares WHERE writer = ?)", (email, writer))  # fmt: skip
    db.execute("UPDATE shares SET writer = ? WHERE writer = ?", (writer, email))
    return db.execute("UPDATE stories SET owner = ? WHERE owner = ?", (writer, email)).rowcount


def email_of(db: Db) -> str | None:
    """The verified address of the connection's writer, as last seen; None for a writer
    who never logged in (the machine's own)."""
    row = db.execute("SELECT email FROM writers WHERE writer = writer()").fetchone()
    return None if row is None else row["email"]


def owner_for(db: Db, email: str) -> str:
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


def has_logged_in(db: Db, writer: str) -> bool:
    """Whether the login `writer` (issuer and subject) has logged in here."""
    return db.execute("SELECT 1 FROM writers WHERE writer = ?", (writer,)).fetchone() is not None
