"""The OpenAI backend's HTTP transport: the `openai` client's own, with every reply bounded.

The `openai` package reads a whole reply before it parses it, and goes on reading after
the caller gave up (`backends.deadline` only stops waiting for it): a server sending
gigabytes filled memory long after the deadline. So the package is given an `httpx2`
client whose transport hands on each reply's body only once this module has read it
whole, in chunks, stopping at the request's deadline and at MAX_REPLY_BYTES (closing the
connection and dropping what it read), and has checked its JSON's depth
(`replies.too_deep`: the package's parser recurses). Replies are asked uncompressed
(`Accept-Encoding: identity`), so the cap is on what gets parsed; one compressed anyway
is refused. These errors are `BackendError`s, which the package lets through unchanged.

Owns: reading a reply off the wire. Not: requests, parsing, wording of the API's errors
(`backends.openai`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2

from backends import replies


class BoundedTransport(httpx2.HTTPTransport):
    """Replies read whole within `timeout` seconds of their request, at most
    MAX_REPLY_BYTES, their JSON no deeper than MAX_DEPTH; `error` words the failures."""

    def __init__(self, *, timeout: float, error: replies.Error):
        super().__init__()
        self.timeout, self.error = timeout, error

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        deadline = time.monotonic() + self.timeout
        request.headers["Accept-Encoding"] = "identity"
        response = super().handle_request(request)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding != "identity":
            response.close()
            raise self.error(f"the server answered {encoding!r}-encoded, not as asked")
        body = BoundedBody(response.stream, deadline, self)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=body,
            extensions=response.extensions,
        )


class BoundedBody(httpx2.SyncByteStream):
    """One reply's body, handed on in one piece once read whole and checked."""

    def __init__(self, stream, deadline: float, transport: BoundedTransport):
        self.stream, self.deadline, self.transport = stream, deadline, transport

    def __iter__(self) -> Iterator[bytes]:
        parts: list[bytes] = []
        size, error = 0, self.transport.error
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
            body = b"".join(parts)
        finally:
            parts.clear()  # an error's traceback must not hold what was read
            self.stream.close()
        if replies.too_deep(body):
            raise error(f"the reply's JSON is nested over {replies.MAX_DEPTH} levels deep")
        yield body

    def close(self) -> None:
        self.stream.close()
