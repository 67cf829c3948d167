"""The one connection interface the store's SQL is written against, whichever database
keeps the stories: an SQLite file (`weave.loom.store_file`) or a PostgreSQL server
(`weave.loom.store_pg`).

`store_rows`, `store_writers` and `store` write their SQL once, in what both databases
read alike: `?` placeholders, `writer()` naming the writer the connection works for,
`INSERT ... ON CONFLICT`, rows read by column name. A `Db` is one connection inside one
transaction; what the two spell differently is a member of it: how a writer's text is
kept (`text`), the first bytes of a node's text (`opening`), holding a story's row until
the transaction ends (`locked`), telling other processes that a story grew (`grew`),
erasing what is deleted (`secure_delete`). A `Database` opens them: `read()` one snapshot
for several reads, `write()` one transaction that waits for the story it changes.
Any error the database raises leaves a `Database` as the `StoreError` saying what to check.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

SCHEMA_VERSION = 7  # 4: owners; 5: the writers who logged in; 6: provenance; 7: shares
LOCAL_WRITER = "local"  # the owner of stories made without a login: this machine's writer
PLACE_OF_OWNER = ""  # the writer of the owner's checkouts and bookmarks: whoever owns it now
DATABASE_SCHEMES = ("postgresql://", "postgres://")  # a URL naming a PostgreSQL database
Row = Mapping[str, Any]  # a row, read by column name


def is_database_url(where: object) -> bool:
    """Whether `where` (a setting's value) names a database server rather than a folder."""
    return isinstance(where, str) and where.strip().lower().startswith(DATABASE_SCHEMES)


class Rows(Protocol):
    """What `Db.execute` returns: the rows of a query, or how many rows a change touched."""

    rowcount: int

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> list[Row]: ...

    def __iter__(self): ...


class Db(ABC):
    """One connection inside one transaction, as the store's SQL sees it."""

    locked = ""  # added to the gate's SELECT: in a write, the story's row is held till the end

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        """Run one statement (`?` placeholders)."""

    @abstractmethod
    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        """Run one statement for each set of values."""

    @abstractmethod
    def opening(self, column: str, size: int) -> str:
        """SQL for the first `size` bytes of a text `column` (bytes that may end mid-character)."""

    def text(self, value: str) -> Any:
        """A writer's text (a node's, a title) as this database keeps it."""
        return value

    def grew(self, story_id: str, nodes: int) -> None:
        """Say, once this transaction commits, that the story now has `nodes` nodes (to the
        other processes watching it; `Database.counter`)."""

    def secure_delete(self) -> None:
        """Have what this transaction deletes overwritten, where the database can."""


class Database(Protocol):
    """Where the stories are kept, as one writer sees it (`writer`); `where` names it to
    people (never with a password)."""

    writer: str

    @property
    def where(self) -> str: ...

    def prepare(self) -> None:
        """Create the schema when missing, check it is ours, migrate an older one."""

    def read(self) -> AbstractContextManager[Db]:
        """One snapshot for several reads."""

    def write(self) -> AbstractContextManager[Db]:
        """One write transaction; a story's row it reads through the gate is held to the end."""

    def as_writer(self, writer: str) -> Database:
        """The same database as `writer` sees it."""

    def reclaim(self) -> None:
        """After a purge: give back the space the deleted rows held (best effort)."""

    def counter(self, story_id: str) -> Callable[[], int]:
        """How many nodes the story has now, cheap enough to ask twice a second."""

    def close(self) -> None:
        """Close the connections this process holds to the database."""
