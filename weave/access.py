"""Who may use the page: the writer whose stories it shows, or why it shows none.

A pure decision from the facts the page reads (the address the server listens on, whether
the request came through a proxy, whether a login is configured in
`.streamlit/secrets.toml` `[auth]`, `[sharing] open` in config.toml, and the claims of who
logged in): on loopback, without a login, the page is the machine's own writer's
(`LOCAL_WRITER`, the CLI's too); with a login, it is the logged-in writer's, who is the
provider (`iss`) and the provider's subject (`sub`), never an address: anyone may type
any address at a provider that lets users set their own. The e-mail address names the
writer to people (the page, `loom give`) and only when the provider says it is verified
(`email_verified`); a login without one is refused, saying why. On any other address, or
through a reverse proxy (which makes loopback reachable from afar), without a login, it
is nobody's unless the config opens it on purpose. Logging in is Streamlit's
(`st.login`); the filter by writer is the store's (`weave.loom.store`), which also hands
a writer the stories kept under their address (`LoomStore.sign_in`). This module imports
neither.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
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
**Your login gave no e-mail address**, which names you to the group. Ask the group's
admin to have the provider send the `email` claim (scope `openid email`)."""
UNVERIFIED = """\
**Your provider has not verified the e-mail address {email}**, so it cannot name you
here: verify it at the provider (or ask the group's admin to), then log in again."""
NO_SUBJECT = """\
**Your login did not say who you are at the provider** (its `iss` and `sub` claims), so
no stories can be yours. Ask the group's admin to check the provider."""


@dataclass(frozen=True)
class Login:
    """A logged-in writer: the provider (`iss`), who they are there (`sub`), and the
    e-mail address the provider verified, which names them to people."""

    issuer: str
    subject: str
    email: str

    @property
    def writer(self) -> str:
        """Their key in the store: issuer and subject. An issuer is a URL, which holds no
        space, so the two never run together, and no address (`writer_for`) has one."""
        return f"{self.issuer} {self.subject}"


@dataclass(frozen=True)
class Access:
    """The page's answer for one visitor: a writer, or a login to ask for, or a refusal."""

    writer: str | None  # whose stories the page shows; None: none at all
    ask_login: bool = False
    refusal: str | None = None  # Markdown saying why not, and what to do
    login: Login | None = None  # who logged in, when a login is configured


def decide(
    *, address: str, proxied: bool = False, login: bool, open_page: bool, logged_in: bool,
    claims: Mapping[str, object] | None,
) -> Access:  # fmt: skip
    """Who the page is for.

    Args: `address`, the server's `server.address` ("" is Streamlit's default: every
    interface); `proxied`, whether the request names a client it was forwarded for
    (`PROXY_HEADERS`); `login`, whether `[auth]` is configured; `open_page`, config's
    `[sharing] open`; `logged_in` and `claims` (the ID token's), from `st.user`.
    """
    if login:
        if not logged_in:
            return Access(None, ask_login=True)
        who = login_from(claims or {})
        if isinstance(who, str):
            return Access(None, refusal=who)
        return Access(who.writer, login=who)
    if (is_loopback(address) and not proxied) or open_page:
        return Access(LOCAL_WRITER)
    where = "through a proxy" if proxied else f"listening on {address or 'every interface'}"
    return Access(None, refusal=SET_UP_LOGIN.format(where=where))


def login_from(claims: Mapping[str, object]) -> Login | str:
    """The writer an ID token's claims name, or the refusal (Markdown) saying why none:
    no issuer or subject, no e-mail address, or one the provider has not verified.
    `email_verified` is true as JSON, or as the text "true" some providers send."""
    issuer, subject = claims.get("iss"), claims.get("sub")
    if not (isinstance(issuer, str) and issuer.strip() and isinstance(subject, str) and subject):
        return NO_SUBJECT
    email = writer_for(claims["email"]) if isinstance(claims.get("email"), str) else None
    if email is None:
        return NO_EMAIL
    verified = claims.get("email_verified")
    if verified is not True and not (isinstance(verified, str) and verified.lower() == "true"):
        return UNVERIFIED.format(email=f"`{email}`")
    return Login(issuer.strip(), subject, email)


def writer_for(email: str) -> str | None:
    """An e-mail address as it names a writer (lower case), or None for one that is not an
    address (no "@" inside, or a space): never `LOCAL_WRITER` nor a `Login.writer`."""
    email = email.strip().lower()
    return email if "@" in email.strip("@") and not any(c.isspace() for c in email) else None


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
