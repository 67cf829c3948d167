"""The store's database reached as another program would reach it, with LLooM's checks
out of the way: SQL run straight on the SQLite file or the PostgreSQL database a test's
store is kept in (the `stories_at` fixture's), to spoil rows or to read what is there."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from weave.loom.store_file import FILE_NAME
from weave.loom.store_sql import is_database_url

Run = Callable[..., list[tuple]]  # run(sql, *params) -> its rows (`?` placeholders)


@contextmanager
def another_program(where: str | Path) -> Iterator[Run]:
    """`run(sql, *params)` on the database at `where` (a folder or a URL), each statement
    committed at once; what it refuses comes out as the database's own error."""
    if is_database_url(where):
        import psycopg

        with psycopg.connect(str(where), autocommit=True) as connection:
            connection.execute("SET search_path TO lloom")

            def run(statement: str, *params: Any) -> list[tuple]:
                found = connection.execute(statement.replace("?", "%s"), params)
                return found.fetchall() if found.description else []

            yield run
        return
    connection = sqlite3.connect(Path(where) / FILE_NAME, isolation_level=None)
    try:
        yield lambda statement, *params: connection.execute(statement, params).fetchall()
    finally:
        connection.close()


def refused() -> tuple[type[Exception], ...]:
    """The errors a database raises when a trigger or a constraint refuses a change."""
    import psycopg

    return (sqlite3.IntegrityError, psycopg.Error)
