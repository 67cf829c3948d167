"""The remote backends' JSON client against real loopback sockets (refusals, timeouts
and junk are tested through each backend)."""

from __future__ import annotations

from backends.http import JsonClient
from tests.http_stubs import dropping_reused_connections


def test_a_kept_alive_connection_the_server_dropped_is_asked_again_on_a_new_one():
    with dropping_reused_connections({"ok": 1}) as url:
        client = JsonClient(url, backend="test", timeout=5)
        assert [client.post("/completion", {}) for _ in range(3)] == [{"ok": 1}] * 3
        assert client.get("/props") == {"ok": 1}
