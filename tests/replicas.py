"""Several page processes on one PostgreSQL database, as README's "Several page processes"
runs them, for the tests and the benchmark: each `streamlit run lloom.py` on a port of its
own, the stories in the database, the login of a writing group against a real OpenID
Connect provider on loopback (`oidc-provider-mock`), every replica with the same cookie
secret (a login made on one is good on all, as behind one proxy), and the model a
llama.cpp server they share."""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen

from scripts.screenshot import streamlit_app
from tests.servers import free_port


@dataclass(frozen=True)
class Replica:
    process: Popen
    url: str


def group_secrets(path: Path, port: int, provider: str, cookie_secret: str) -> Path:
    """A secrets.toml at `path` for logins through `provider` to the page on `port`."""
    path.write_text(
        "[auth]\n"
        f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
        f'cookie_secret = "{cookie_secret}"\n'
        'client_id = "lloom"\nclient_secret = "not-a-secret"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n'
    )
    return path


@contextmanager
def replicas(
    folder: Path, count: int, *, provider: str, database: str | None, env: Mapping[str, str]
) -> Iterator[list[Replica]]:
    """`count` page processes on the database at `database` (its URL), each with a data
    folder of its own under `folder` (no story is kept there); stopped after. Without a
    database, the stories are in the first one's data folder (SQLite: one process)."""
    cookie_secret = secrets.token_hex(16)
    with ExitStack() as stack:
        started = []
        for k in range(count):
            port, data = free_port(), folder / f"replica{k}"
            data.mkdir(parents=True, exist_ok=True)
            login = group_secrets(data / "secrets.toml", port, provider, cookie_secret)
            process, url = stack.enter_context(streamlit_app(
                data, "--secrets.files", str(login), port=port,
                env={**env, "LLOOM_DATABASE_URL": database or ""},
            ))  # fmt: skip
            started.append(Replica(process, url))
        yield started
