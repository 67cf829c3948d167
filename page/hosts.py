"""The page's server answers only the Host names `weave.hosts` allows, on every request.

`streamlit run lloom.py` serves lloom.py's `app`, an `st.App` whose first middleware is
`HostGuard` (`page.server.middleware` sets it up with the settings' names): the page, the
websocket its script talks over, media downloads, uploads and every other route are
refused (HTTP 403 and one line of text saying why) unless the request's Host header is a
loopback name or one `[sharing] allowed_hosts` lists. This module knows ASGI and nothing
of stories or settings; the decision is `weave.hosts`'.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from weave import hosts

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SHOWN_HOST = re.compile(r"[^A-Za-z0-9.:\[\]-]")  # what of a refused Host the line repeats
REFUSED = (
    "LLooM answers only to this machine's names (localhost, 127.0.0.1, [::1]) and those "
    "[sharing] allowed_hosts in its config.toml lists, not to {host}.\n"
)


class HostGuard:
    """ASGI middleware: requests (HTTP and websocket) whose Host is not allowed get 403."""

    def __init__(self, app: ASGIApp, *, allowed: frozenset[str]):
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan: the server's own
            await self.app(scope, receive, send)
            return
        names = [value.decode("latin-1") for key, value in scope["headers"] if key == b"host"]
        if len(names) == 1 and hosts.allowed(names[0], self.allowed):
            await self.app(scope, receive, send)
            return
        host = SHOWN_HOST.sub("", names[0])[:100] if len(names) == 1 else "a request naming none"
        body = REFUSED.format(host=host or "an empty name").encode()
        if scope["type"] == "http":
            await _respond(send, "http.response", body)
        elif "websocket.http.response" in scope.get("extensions", {}):
            await receive()  # websocket.connect
            await _respond(send, "websocket.http.response", body)
        else:
            await receive()
            await send({"type": "websocket.close", "code": 1008})  # the server answers 403


async def _respond(send: Send, kind: str, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode()),
               (b"x-content-type-options", b"nosniff")]  # fmt: skip
    await send({"type": f"{kind}.start", "status": 403, "headers": headers})
    await send({"type": f"{kind}.body", "body": body})
