"""The OpenAI backend's HTTP transport: the `openai` client's own, with every reply bounded.

The `openai` package reads a whole reply before it parses it, and goes on reading after
the caller gave up (`backends.deadline` only stops waiting for it): a server sending
gigabytes filled memory long after the deadline. So the package is given an `httpx2`
client whose transport hands on each reply's body only once this module has read it
whole, in chunks, stopping at the request's deadline and at MAX_REPLY_BYTES (closing the
connection and dropping what it read), and has checked its JSON's depth
(`replies.too_deep`: the package's parser recurses). Replies are asked uncompressed
(`Accept-Encoding: identity`), so the cap is on what gets parsed; one compressed anyway
is refused. A reply broken off (the connection closed short of its body's length)
says what the server sent, where the package would call it a failure to connect; so
does a server that hangs up without a reply (after one more try on a new connection). These
errors are `BackendError`s, which the package lets through unchanged.

Owns: reading a reply off the wire. Not: requests, parsing, wording of the API's errors
(`backends.openai`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2

from backends import replies

BROKEN_OFF = (httpx2.RemoteProtocolError, httpx2.ReadError)  # the server closed mid-reply


class BoundedTransport(httpx2.HTTPTransport):
    """Replies read whole within `timeout` seconds of their request, at most
    MAX_REPLY_BYTES, their JSON no deeper than MAX_DEPTH; `error` words the failures."""

    def __init__(self, *, timeout: float, error: replies.Error):
        super().__init__()
        self.timeout, self.error = timeout, error

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        deadline = time.monotonic() + self.timeout
        request.headers["Accept-Encoding"] = "identity"
        response = self._answered(request)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding != "identity":
            response.close()
            raise self.error(f"the server answered {encoding!r}-encoded, not as asked")
        body = BoundedBody(response, deadline, self)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=body,
            extensions=response.extensions,
        )

    def _answered(self, request: httpx2.Request) -> httpx2.Response:
        """The reply's head; asked once more, on a new connection, when the server hung up
        without one (a kept-alive connection closing as the request went out), then an
        error saying so rather than the package's "cannot connect"."""
        try:
            return super().handle_request(request)
        except httpx2.RemoteProtocolError:
            pass
        try:
            return super().handle_request(request)
        except httpx2.RemoteProtocolError as e:
            raise self.error("the server closed the connection without answering") from e


class BoundedBody(httpx2.SyncByteStream):
    """One reply's body, handed on in one piece once read whole and checked."""

    def __init__(self, response: httpx2.Response, deadline: float, transport: BoundedTransport):
        self.stream, self.deadline, self.transport = response.stream, deadline, transport
        self.status, self.headers = response.status_code, response.headers

    def __iter__(self) -> Iterator[bytes]:
        parts: list[bytes] = []
        size, error = 0, self.transport.error
        try:
            try:
                for chunk in self.stream:
                    size += len(chunk)
                    if size > replies.MAX_REPLY_BYTES:
                        raise error(f"the reply is over {replies.MAX_REPLY_BYTES >> 20} MiB")
                    if time.monotonic() > self.deadline:
                        raise error(
                            f"too slow: the reply took over {self.transport.timeout:g} s to arrive"
                        )
                    parts.append(chunk)
            except BROKEN_OFF as e:
                raise self.broken_off(b"".join(parts[:1])[:60], size) from e
            body = b"".join(parts)
        finally:
            parts.clear()  # an error's traceback must not hold what was read
            self.stream.close()
        if replies.too_deep(body):
            raise error(f"the reply's JSON is nested over {replies.MAX_DEPTH} levels deep")
        yield body

    def broken_off(self, start: bytes, size: int):
        """What the server sent of a reply it broke off: its status, how much of the
        length it announced, and how the reply began."""
        length = self.headers.get("Content-Length")
        of = f" of the {length} announced" if length else ""
        began = replies.one_line(start.decode("utf-8", "replace"))
        return self.transport.error(
            f"the server broke off its reply (HTTP {self.status}) after {size:,} bytes{of}, "
            f"beginning {began!r}"
        )

    def close(self) -> None:
        self.stream.close()
