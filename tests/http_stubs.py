"""Tiny real HTTP servers on loopback that misbehave on purpose, for error-path tests.

They are real sockets answering real HTTP, not mocks: each serves one fixed reply (or
sleeps) so a backend meets junk, HTTP errors and silence as it would in the field.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Quiet(BaseHTTPRequestHandler):
    """A stub's handler: it logs nothing, and `_send` answers one JSON reply."""

    def _send(self, code: int, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextmanager
def serving(status: int = 200, body: bytes | str | dict = b"", *, delay: float = 0.0, routes=None):
    """Serve `body` with `status` for every path (or per path from `routes`); yields the URL."""
    routes = routes or {}

    class Handler(_Quiet):
        def _reply(self):
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if delay:
                time.sleep(delay)
            code, payload = routes.get(self.path.split("?")[0], (status, body))
            data = json.dumps(payload).encode() if isinstance(payload, dict) else payload
            data = data.encode() if isinstance(data, str) else data
            with suppress(BrokenPipeError, ConnectionResetError):  # the client gave up first
                self._send(code, data)

        do_GET = do_POST = _reply

    with _running(Handler) as url:
        yield url


@contextmanager
def dropping_reused_connections(body: dict):
    """Serve `body` over HTTP/1.1 keep-alive, but close a connection without a reply when
    a second request arrives on it: a server whose idle keep-alive timeout fires just as
    the client reuses the connection. Yields the URL."""

    class Handler(_Quiet):
        protocol_version = "HTTP/1.1"
        answered = False  # one handler per connection

        def _reply(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.answered:
                self.close_connection = True
                return
            self.answered = True
            self._send(200, json.dumps(body).encode())

        do_GET = do_POST = _reply

    with _running(Handler) as url:
        yield url


@contextmanager
def _running(handler: type[BaseHTTPRequestHandler]):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
