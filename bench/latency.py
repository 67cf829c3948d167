"""A loopback TCP relay that adds a fixed delay to every request: a network in a box.

On loopback a round trip costs almost nothing, which hides what a client's request
pattern costs against a server across a LAN or the internet. The relay forwards bytes
both ways and holds each client-to-server chunk for `rtt_ms` first, so every request
pays one round trip of latency; responses pass straight through.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager, suppress
from urllib.parse import urlparse

CHUNK = 65536


@contextmanager
def delayed(url: str, rtt_ms: float):
    """Yield a URL that reaches `url` through the relay (or `url` itself for 0 ms)."""
    if rtt_ms <= 0:
        yield url
        return
    target = urlparse(url)
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    threading.Thread(
        target=_accept, args=(listener, (target.hostname, target.port), rtt_ms / 1000, stop),
        daemon=True,
    ).start()  # fmt: skip
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


def _accept(listener: socket.socket, upstream: tuple, delay: float, stop: threading.Event):
    while not stop.is_set():
        try:
            client, _ = listener.accept()
        except OSError:
            return
        server = socket.create_connection(upstream)
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pump, args=(client, server, delay), daemon=True).start()
        threading.Thread(target=_pump, args=(server, client, 0.0), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket, delay: float) -> None:
    try:
        while data := source.recv(CHUNK):
            if delay:
                time.sleep(delay)
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
