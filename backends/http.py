"""JSON over HTTP for the remote backends: one keep-alive session, errors made plain.

Replies are JSON, or a server-sent event stream read to its end (`post_events`: a
llama-server streams a completion's per-token probabilities, stop tokens included).

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
        events = []
        for line in reply.text.splitlines():
            if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                continue
            try:
                event = json.loads(line[5:])
            except ValueError as e:
                raise self.error(f"{path} streamed what is not JSON: {line[:200]!r}") from e
            if isinstance(event, dict) and "error" in event:
                error = event["error"]
                message = error.get("message", error) if isinstance(error, dict) else error
                raise self.error(f"{path} failed while streaming: {str(message)[:300]}")
            events.append(event)
        return events

    def error(self, message: str) -> BackendError:
        return BackendError(message, backend=self.backend, url=self.base_url)

    def close(self) -> None:
        self.session.close()

    def _send(self, method: str, path: str, body: dict | None) -> requests.Response:
        """One request; asked once more, on a new connection, when the pooled one turns out
        to have been closed by the server. Every request here only reads, so that is safe."""
        url = f"{self.base_url}{path}"
        try:
            return self.session.request(method, url, json=body, timeout=self.timeout)
        except requests.exceptions.ConnectionError as e:
            if not _dropped(e):
                raise
        return self.session.request(method, url, json=body, timeout=self.timeout)

    def _call(self, method: str, path: str, body: dict | None) -> Any:
        reply = self._reply(method, path, body)
        try:
            return reply.json()
        except (ValueError, json.JSONDecodeError) as e:
            raise self.error(
                f"{path} answered with something that is not JSON: {reply.text[:200]!r}"
            ) from e

    def _reply(self, method: str, path: str, body: dict | None) -> requests.Response:
        """The server's reply with a success status, or a `BackendError` saying what failed."""
        try:
            reply = within(self.timeout, lambda: self._send(method, path, body))
        except requests.exceptions.ConnectionError as e:
            raise self.error(
                f"cannot connect ({_reason(e)}): is the server running, and is the address right?"
            ) from e
        except (requests.exceptions.Timeout, TooSlow) as e:
            raise self.error(
                f"too slow: no complete answer from {path} within {self.timeout:g} s; the "
                "server is busy or stuck: check its load, or raise the timeout"
            ) from e
        except requests.exceptions.RequestException as e:
            raise self.error(f"request to {path} failed: {e}") from e
        if reply.status_code >= 400:
            raise self.error(f"{path} answered HTTP {reply.status_code}: {server_message(reply)}")
        return reply


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
