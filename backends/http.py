"""JSON over HTTP for the remote backends: one keep-alive session, errors made plain.

Replies are JSON, or a server-sent event stream read to its end (`post_events`: a
llama-server streams a completion's per-token probabilities, stop tokens included), or
read as it arrives (`open_events`: a reader thread hands each event over as the server
sends it, so a caller can act on a vLLM completion's first tokens while the server goes
on with the rest, and can drop the connection to stop it).

The timeout bounds each request end to end (`backends.deadline`), not each socket read:
a server that drips its reply a byte at a time is too slow all the same. A server may
close an idle kept-alive connection just as a request goes out on it; that request is
sent again, once, on a new connection, within the same deadline.

Every failure leaves here as a `BackendError` that names the backend, the server and
what to check: a refused connection, a timeout, an HTTP error with the server's own
message, or a reply that is not the JSON expected. This module knows nothing of
completions; the backend modules build the requests.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from contextlib import suppress
from http.client import RemoteDisconnected
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ProtocolError

from backends.base import BackendError
from backends.deadline import TooSlow, within


class JsonClient:
    """POST/GET JSON to one server with a pooled session."""

    def __init__(self, base_url: str, *, backend: str, timeout: float, pool: int = 8):
        self.base_url = base_url.rstrip("/")
        self.backend = backend
        self.timeout = timeout
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=max(pool, 1))
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def get(self, path: str) -> Any:
        return self._call("GET", path, None)

    def post(self, path: str, body: dict) -> Any:
        return self._call("POST", path, body)

    def post_events(self, path: str, body: dict) -> list[Any]:
        """POST and read a server-sent event stream to its end: each `data:` line's JSON.
        An event that carries an `error` is raised as the server's own message."""
        reply = self._reply("POST", path, body)
        events = (self.event(path, line) for line in reply.text.splitlines())
        return [event for event in events if event is not NO_EVENT]

    def event(self, path: str, line: str | bytes) -> Any:
        """The JSON of one `data:` line of an event stream; NO_EVENT for any other line
        and for the end marker. An event that carries an `error` is raised as the
        server's own message."""
        line = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            return NO_EVENT
        try:
            event = json.loads(line[5:])
        except ValueError as e:
            raise self.error(f"{path} streamed what is not JSON: {line[:200]!r}") from e
        if isinstance(event, dict) and "error" in event:
            error = event["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise self.error(f"{path} failed while streaming: {str(message)[:300]}")
        return event

    def open_events(self, path: str, body: dict) -> EventStream:
        """POST and return the reply's events as they arrive (`EventStream`), all within
        one deadline from now. A reply that is one JSON body, not an event stream, is
        one event."""
        deadline = time.monotonic() + self.timeout
        reply = self._reply("POST", path, body, stream=True)
        return EventStream(self, path, reply, deadline)

    def too_slow(self, path: str) -> BackendError:
        return self.error(
            f"too slow: no complete answer from {path} within {self.timeout:g} s; the "
            "server is busy or stuck: check its load, or raise the timeout"
        )

    def error(self, message: str) -> BackendError:
        return BackendError(message, backend=self.backend, url=self.base_url)

    def close(self) -> None:
        self.session.close()

    def _send(self, method: str, path: str, body: dict | None, stream: bool) -> requests.Response:
        """One request; asked once more, on a new connection, when the pooled one turns out
        to have been closed by the server. Every request here only reads, so that is safe.
        A streamed reply's body is left to read, unless it is an error's."""

        def send() -> requests.Response:
            reply = self.session.request(
                method, url, json=body, timeout=self.timeout, stream=stream
            )
            if reply.status_code >= 400:
                _ = reply.content  # an error's message is read within the deadline too
            return reply

        url = f"{self.base_url}{path}"
        try:
            return send()
        except requests.exceptions.ConnectionError as e:
            if not _dropped(e):
                raise
        return send()

    def _call(self, method: str, path: str, body: dict | None) -> Any:
        return self.json_of(path, self._reply(method, path, body))

    def json_of(self, path: str, reply: requests.Response) -> Any:
        try:
            return reply.json()
        except (ValueError, json.JSONDecodeError) as e:
            raise self.error(
                f"{path} answered with something that is not JSON: {reply.text[:200]!r}"
            ) from e

    def _reply(
        self, method: str, path: str, body: dict | None, *, stream: bool = False
    ) -> requests.Response:
        """The server's reply with a success status, or a `BackendError` saying what failed."""
        try:
            reply = within(self.timeout, lambda: self._send(method, path, body, stream))
        except requests.exceptions.ConnectionError as e:
            raise self.error(
                f"cannot connect ({_reason(e)}): is the server running, and is the address right?"
            ) from e
        except (requests.exceptions.Timeout, TooSlow) as e:
            raise self.too_slow(path) from e
        except requests.exceptions.RequestException as e:
            raise self.error(f"request to {path} failed: {e}") from e
        if reply.status_code >= 400:
            raise self.error(f"{path} answered HTTP {reply.status_code}: {server_message(reply)}")
        return reply


NO_EVENT = object()  # a stream's line that carries no event
_END = object()  # the reader thread's mark: the reply is over


class EventStream:
    """A reply being read on a thread of its own: `next()` gives its events in order,
    as they arrive, or None once the reply is over (`peek()` looks at the next one);
    `close()` drops the connection, which tells a server to stop. Errors (a broken
    connection, an event that is not JSON or that reports an error, the request's
    deadline passing) are raised by `next()` on the caller's thread, as `BackendError`s
    naming the server."""

    def __init__(self, client: JsonClient, path: str, reply: requests.Response, deadline: float):
        self.client, self.path, self.reply, self.deadline = client, path, reply, deadline
        self._items: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = threading.Event()
        self._peeked: Any = NO_EVENT
        self.over = False
        self.streamed = reply.headers.get("content-type", "").startswith("text/event-stream")
        read = self._read_events if self.streamed else self._read_whole
        threading.Thread(target=read, name="lloom-events", daemon=True).start()

    def peek(self) -> Any:
        """The next event, left to be taken by `next()` (waiting for it)."""
        if self._peeked is NO_EVENT:
            self._peeked = self._take()
        return self._peeked

    def next(self) -> Any:
        event, self._peeked = self.peek(), NO_EVENT
        return event

    def _take(self) -> Any:
        if self.over:
            return None
        try:
            item = self._items.get(timeout=max(self.deadline - time.monotonic(), 0))
        except queue.Empty:
            self.close()
            raise self.client.too_slow(self.path) from None
        if item is _END:
            self.over = True
            return None
        if isinstance(item, BackendError):
            self.close()
            raise item
        return item

    def close(self) -> None:
        """Stop reading and drop the connection (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self.over = True
        connection = getattr(self.reply.raw, "connection", None)
        sock = getattr(connection, "sock", None)
        with suppress(OSError, AttributeError):
            if sock is not None:  # wakes the reader's blocked read at once
                sock.shutdown(socket.SHUT_RDWR)
        with suppress(Exception):
            self.reply.close()

    def _read_events(self) -> None:
        self._read(lambda: (self.client.event(self.path, line) for line in self.reply.iter_lines()))

    def _read_whole(self) -> None:
        self._read(lambda: [self.client.json_of(self.path, self.reply)])

    def _read(self, events) -> None:
        try:
            for event in events():
                if self._closed.is_set():
                    return
                if event is not NO_EVENT:
                    self._items.put(event)
            self._items.put(_END)
        except BackendError as e:
            self._items.put(e)
        except requests.exceptions.RequestException as e:
            if not self._closed.is_set():
                self._items.put(self.client.error(f"request to {self.path} failed: {e}"))
        except Exception as e:  # a connection dropped by close() fails in many ways
            if not self._closed.is_set():
                self._items.put(self.client.error(f"reading {self.path} failed: {e!r}"))


def _dropped(error: requests.exceptions.ConnectionError) -> bool:
    """Whether a kept-alive connection was closed by the server before it answered (its
    idle timeout firing as the request went out), rather than the server being away."""
    cause = error.args[0] if error.args else None
    return isinstance(cause, ProtocolError) and isinstance(
        cause.args[-1], (RemoteDisconnected, ConnectionResetError)
    )


def server_message(reply: requests.Response) -> str:
    """The server's own words about an error, from its JSON body or its text."""
    try:
        body = reply.json()
    except ValueError:
        return reply.text[:300] or reply.reason
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        return str(error.get("message") or error)[:300]
    return str(error)[:300]


def _reason(error: Exception) -> str:
    text = str(error)
    return "connection refused" if "refused" in text.lower() else text[:160]


def expect(condition: bool, client: JsonClient, what: str) -> None:
    """Raise a clear error when a reply lacks what the backend needs."""
    if not condition:
        raise client.error(f"unexpected reply: {what}")
