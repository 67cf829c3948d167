"""JSON over HTTP for the remote backends: one keep-alive session, errors made plain.

Replies are JSON, or a server-sent event stream read to its end (`post_events`: a
llama-server streams a completion's per-token probabilities, stop tokens included), or
read as it arrives (`open_events`: a reader thread hands each event over as the server
sends it, so a caller can act on a vLLM completion's first tokens while the server goes
on with the rest, and can drop the connection to stop it).

The timeout bounds each request end to end (`backends.deadline`), not each socket read:
a server that drips its reply a byte at a time is too slow all the same, streamed or
not. Every body is read here, in chunks, by one loop (`_Body`) that stops at the
request's deadline and at MAX_REPLY_BYTES (`backends.replies`), closes the connection
and drops what it read: a request given up stops reading on its own thread too, so a
huge reply costs at most the cap, for at most the deadline. JSON is parsed with a bound
on its depth (`replies.parsed`). A server may close an idle kept-alive connection just
as a request goes out on it; that request is sent again, once, on a new connection,
within the same deadline.

Every failure leaves here as a `BackendError` that names the backend, the server and
what to check: a refused connection, a timeout, an HTTP error with the server's own
message (one short line), a reply too big, or one that is not the JSON expected. This
module knows nothing of completions; the backend modules build the requests.
"""

from __future__ import annotations

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

from backends import replies
from backends.deadline import TooSlow, bounded, within
from backends.errors import BackendError

CHUNK = 1 << 16  # bytes a read asks for


class JsonClient:
    """POST/GET JSON to one server with a pooled session."""

    def __init__(self, base_url: str, *, backend: str, timeout: float, pool: int = 8):
        self.base_url = base_url.rstrip("/")
        self.backend = backend
        try:
            self.timeout = bounded(timeout)
        except ValueError as e:
            raise self.error(str(e)) from None
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
        _, data = self._reply("POST", path, body)
        events = (self.event(path, line) for line in data.splitlines())
        return [event for event in events if event is not NO_EVENT]

    def event(self, path: str, line: str | bytes) -> Any:
        """The JSON of one `data:` line of an event stream; NO_EVENT for any other line
        and for the end marker. An event that carries an `error` is raised as the
        server's own message."""
        line = line.encode("utf-8") if isinstance(line, str) else line
        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
            return NO_EVENT
        event = replies.parsed(line[5:], self.error, f"{path} (streamed)")
        if isinstance(event, dict) and "error" in event:
            error = event["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise self.error(f"{path} failed while streaming: {replies.one_line(str(message))}")
        return event

    def open_events(self, path: str, body: dict) -> EventStream:
        """POST and return the reply's events as they arrive (`EventStream`), all within
        one deadline from now. A reply that is one JSON body, not an event stream, is
        one event."""
        deadline = time.monotonic() + self.timeout
        reply, _ = self._reply("POST", path, body, stream=True, deadline=deadline)
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

    def _send(
        self, method: str, path: str, body: dict | None, stream: bool, deadline: float
    ) -> tuple[requests.Response, bytes]:
        """One request and its body (b"" for a stream's, left to read, unless it is an
        error's); asked once more, on a new connection, when the pooled one turns out to
        have been closed by the server. Every request here only reads, so that is safe."""

        def send() -> tuple[requests.Response, bytes]:
            reply = self.session.request(method, url, json=body, timeout=self.timeout, stream=True)
            if stream and reply.status_code < 400:
                return reply, b""
            return reply, _Body(self, path, reply, deadline).read()

        url = f"{self.base_url}{path}"
        try:
            return send()
        except requests.exceptions.ConnectionError as e:
            if not _dropped(e):
                raise
        return send()

    def _call(self, method: str, path: str, body: dict | None) -> Any:
        _, data = self._reply(method, path, body)
        return replies.parsed(data, self.error, path)

    def _reply(
        self,
        method: str,
        path: str,
        body: dict | None,
        *,
        stream: bool = False,
        deadline: float | None = None,
    ) -> tuple[requests.Response, bytes]:
        """The server's reply with a success status and its body (b"" when `stream`), or
        a `BackendError` saying what failed."""
        deadline = time.monotonic() + self.timeout if deadline is None else deadline
        try:
            reply, data = within(
                self.timeout, lambda: self._send(method, path, body, stream, deadline)
            )
        except requests.exceptions.ConnectionError as e:
            if _dropped(e):  # on a new connection too: the server took the request, then hung up
                raise self.error(
                    f"{path}: the server closed the connection without answering"
                ) from e
            raise self.error(
                f"cannot connect ({_reason(e)}): is the server running, and is the address right?"
            ) from e
        except (requests.exceptions.Timeout, TooSlow) as e:
            raise self.too_slow(path) from e
        except requests.exceptions.RequestException as e:
            raise self.error(f"request to {path} failed: {e}") from e
        if reply.status_code >= 400:
            message = server_message(data, reply.reason)
            raise self.error(f"{path} answered HTTP {reply.status_code}: {message}")
        return reply, data


class _Body:
    """Reading one reply's body in chunks, up to its request's deadline and
    MAX_REPLY_BYTES: past either the connection is closed and what was read dropped."""

    def __init__(self, client: JsonClient, path: str, reply: requests.Response, deadline: float):
        self.client, self.path, self.reply, self.deadline = client, path, reply, deadline
        self.size = 0

    def chunks(self):
        """The body's chunks as they arrive (raising past the deadline or the cap)."""
        for chunk in self.reply.iter_content(CHUNK):
            self.size += len(chunk)
            if self.size > replies.MAX_REPLY_BYTES:
                raise self.client.error(
                    f"{self.path} answered more than {replies.MAX_REPLY_BYTES >> 20} MiB"
                )
            if time.monotonic() > self.deadline:
                raise self.client.too_slow(self.path)
            yield chunk

    def read(self) -> bytes:
        parts: list[bytes] = []
        try:
            parts.extend(self.chunks())
            return b"".join(parts)
        finally:
            parts.clear()  # an error's traceback must not hold what was read
            self.reply.close()

    def lines(self):
        """The body's lines (without their ends); a line is kept in parts as it grows, so
        one long line costs its size, not its size squared."""
        pending: list[bytes] = []
        try:
            for chunk in self.chunks():
                if b"\n" not in chunk:
                    pending.append(chunk)
                    continue
                first, *done, last = chunk.split(b"\n")
                yield b"".join([*pending, first])
                yield from done
                pending = [last]
            if any(pending):
                yield b"".join(pending)
        finally:
            pending.clear()
            self.reply.close()


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
        body = _Body(self.client, self.path, self.reply, self.deadline)
        self._read(
            lambda: (self.client.event(self.path, line.rstrip(b"\r")) for line in body.lines())
        )

    def _read_whole(self) -> None:
        body = _Body(self.client, self.path, self.reply, self.deadline)
        self._read(lambda: [replies.parsed(body.read(), self.client.error, self.path)])

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


def server_message(data: bytes, reason: str | None) -> str:
    """The server's own words about an error, from its JSON body or its text (an HTML
    page's too), on one short line."""
    try:
        body = replies.parsed(data, _no_json, "")
    except ValueError:
        return replies.one_line(data[:4096].decode("utf-8", "replace")) or str(reason or "")
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        error = error.get("message") or error
    return replies.one_line(str(error)[:4096])


def _no_json(message: str) -> ValueError:
    return ValueError(message)


def _reason(error: Exception) -> str:
    text = str(error)
    return "connection refused" if "refused" in text.lower() else text[:160]


def expect(condition: bool, client: JsonClient, what: str) -> None:
    """Raise a clear error when a reply lacks what the backend needs."""
    if not condition:
        raise client.error(f"unexpected reply: {what}")
