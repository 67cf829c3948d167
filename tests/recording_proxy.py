"""A loopback proxy in front of a real server that records the requests it passes on.

Tests of what a backend sends (the prompts a steered search makes) talk to the real
server through it: every request is forwarded as it came, every reply (streamed ones
too) passed back as it comes, and each request's path and JSON body is kept, in order.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests


@dataclass
class Recording:
    """The proxy's URL and the requests it has passed on: (path, JSON body or None)."""

    url: str
    requests: list[tuple[str, object]] = field(default_factory=list)

    def bodies(self, path: str) -> list:
        """The JSON bodies of the requests to `path`, in order."""
        return [body for at, body in list(self.requests) if at == path]


@contextmanager
def recording(target: str):
    """A proxy on a free loopback port forwarding to `target`; yields its `Recording`."""
    target = target.rstrip("/")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            with lock:
                kept.requests.append((self.path.split("?")[0], body))
            headers = {k: v for k, v in self.headers.items() if k.lower() in _PASSED}
            reply = requests.request(self.command, target + self.path, data=raw or None,
                                     headers=headers, stream=True, timeout=600)  # fmt: skip
            try:
                self.send_response(reply.status_code)
                for name in ("Content-Type",):
                    if name in reply.headers:
                        self.send_header(name, reply.headers[name])
                self.end_headers()  # no length: the reply ends when the connection closes
                for chunk in reply.iter_content(chunk_size=None):
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading (a closed stream)
            finally:
                reply.close()

        do_GET = do_POST = _forward

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    kept = Recording(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield kept
    finally:
        server.shutdown()
        server.server_close()


_PASSED = {"content-type", "authorization", "accept"}
