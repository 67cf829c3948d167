"""Who may use the page: the writer whose stories it shows, or why it shows none.

A pure decision from the facts the page reads (the address the server listens on, whether
the request came through a proxy, whether a login is configured in
`.streamlit/secrets.toml` `[auth]`, `[sharing] open` in config.toml, and who logged in):
on loopback, without a login, the page is the machine's own writer's (`LOCAL_WRITER`, the
CLI's too); with a login, it is the logged-in writer's, named by their e-mail address; on
any other address, or through a reverse proxy (which makes loopback reachable from
afar), without a login, it is nobody's unless the config opens it on purpose. Logging in
is Streamlit's (`st.login`); the filter by writer is the store's (`weave.loom.store`).
This module imports neither.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from weave.loom.store_file import LOCAL_WRITER

UNIX_SOCKET = "unix://"  # Streamlit's prefix for a server on a Unix socket: local
PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-Ip")  # a proxy names the client

SET_UP_LOGIN = """\
**This page is reachable from other machines ({where}), and no login is set up**, so
it shows no story and runs no model: anyone on this network could read your stories.

- To keep it to this machine, run it as README says: `.venv/bin/streamlit run lloom.py`
  (it listens on 127.0.0.1).
- To share it with a group, set up a login: an `[auth]` section in
  `.streamlit/secrets.toml` naming your OpenID Connect provider (`redirect_uri`,
  `cookie_secret`, `client_id`, `client_secret`, `server_metadata_url`); README's
  "Share with a writing group" shows one. Each writer then sees only their own stories.
- On a network you trust completely, open it to everyone on purpose with
  `[sharing] open = true` in config.toml: everyone then shares this machine's stories.
"""

NO_EMAIL = """\
**Your login gave no e-mail address**, and stories are kept per address. Ask the group's
admin to have the provider send the `email` claim (scope `openid email`)."""


@dataclass(frozen=True)
class Access:
    """The page's answer for one visitor: a writer, or a login to ask for, or a refusal."""

    writer: str | None  # whose stories the page shows; None: none at all
    ask_login: bool = False
    refusal: str | None = None  # Markdown saying why not, and what to do


def decide(
    *, address: str, proxied: bool = False, login: bool, open_page: bool, logged_in: bool,
    email: str | None,
) -> Access:  # fmt: skip
    """Who the page is for.

    Args: `address`, the server's `server.address` ("" is Streamlit's default: every
    interface); `proxied`, whether the request names a client it was forwarded for
    (`PROXY_HEADERS`); `login`, whether `[auth]` is configured; `open_page`, config's
    `[sharing] open`; `logged_in` and `email`, from `st.user`.
    """
    if login:
        if not logged_in:
            return Access(None, ask_login=True)
        writer = writer_for(email or "")
        return Access(writer) if writer else Access(None, refusal=NO_EMAIL)
    if (is_loopback(address) and not proxied) or open_page:
        return Access(LOCAL_WRITER)
    where = "through a proxy" if proxied else f"listening on {address or 'every interface'}"
    return Access(None, refusal=SET_UP_LOGIN.format(where=where))


def writer_for(email: str) -> str | None:
    """The writer an e-mail address names (lower case), or None for one that is not an
    address: a writer is never `LOCAL_WRITER` by accident."""
    email = email.strip().lower()
    return email if "@" in email.strip("@") else None


def is_loopback(address: str) -> bool:
    """Whether a server bound to `address` is reachable from this machine only.

    "" (every interface), a wildcard and any host name but localhost are not.
    """
    address = address.strip()
    if address.startswith(UNIX_SOCKET) or address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False
