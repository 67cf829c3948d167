"""DNS rebinding: the page answers only this machine's names and those the settings allow.

The decision (`weave.hosts`) and its setting (`[sharing] allowed_hosts`) directly; then
the real page, started as README says (`streamlit run lloom.py`), asked over plain HTTP
with a foreign Host for its first page, its websocket and a media download, and opened
in Chromium through a name mapped to 127.0.0.1, as a rebinding page would have it.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from page.hosts import REFUSED
from scripts.screenshot import CHROMIUM, CHROMIUM_ARGS, streamlit_app
from tests.test_private import Watchman, new_page, no_model, settled
from weave.config import ConfigError, settings_from_table
from weave.hosts import allowed, host_name
from weave.loom.store import LoomStore

ROOT = Path(__file__).resolve().parent.parent
FOREIGN = "rebind.example"
UPGRADE = ("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")  # fmt: skip


@pytest.mark.parametrize(
    "header, name, served",
    [("localhost:8501", "localhost", True), ("LocalHost.", "localhost", True),
     ("127.0.0.1:8501", "127.0.0.1", True), ("127.8.9.1", "127.8.9.1", True),
     ("[::1]:8501", "::1", True), ("rebind.example:8501", FOREIGN, False),
     ("127.0.0.1.nip.io", "127.0.0.1.nip.io", False), ("0.0.0.0:8501", "0.0.0.0", False),
     ("192.168.1.20", "192.168.1.20", False), ("::1", None, False), ("", None, False),
     ("localhost:http", None, False), ("user@localhost", None, False),
     ("[::1]evil", None, False)],
)  # fmt: skip
def test_only_loopback_names_are_served_by_default(header, name, served):
    assert host_name(header) == name
    assert allowed(header) is served


def test_the_settings_allow_more_names_and_refuse_what_is_not_one():
    sharing = settings_from_table({"sharing": {"allowed_hosts": ["LLoom.Example.org."]}}).sharing
    assert sharing.allowed_hosts == ("lloom.example.org",)
    assert allowed("lloom.example.org:443", frozenset(sharing.allowed_hosts))
    assert not allowed("evil.example.org", frozenset(sharing.allowed_hosts))
    assert not allowed(None, frozenset(sharing.allowed_hosts))
    for wrong in (["https://lloom.example.org"], ["lloom.example.org:8501"], "lloom", [3]):
        with pytest.raises(ConfigError, match=r"f.toml \[sharing\] allowed_hosts"):
            settings_from_table({"sharing": {"allowed_hosts": wrong}}, "f.toml")


# -- the real page -------------------------------------------------------------------------
def ask(url: str, path: str, host: str, extra: str = "") -> tuple[int, bytes]:
    """GET `path` from the page at `url` naming `host`: the status and what followed."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += conn.recv(65536) or b"\r\n\r\n"  # closed: what came is all
        head, _, body = reply.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
        while len(body) < length and (more := conn.recv(65536)):
            body += more
    return int(head.split()[1]), body


def refusal(host: str) -> bytes:
    return REFUSED.format(host=host).encode()


@pytest.fixture
def watchman():
    w = Watchman()
    yield w
    w.close()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here")
def test_a_foreign_host_gets_one_line_for_the_page_its_websocket_and_its_downloads(
    tmp_path, browser, watchman
):
    story_id, _ = LoomStore(tmp_path).create("A private opening nobody else may read.")
    with streamlit_app(tmp_path, env=no_model(tmp_path, watchman)) as (_, url):
        port = url.rsplit(":", 1)[1]
        page = new_page(browser, f"{url}/?story={story_id}")  # the writer, on 127.0.0.1
        settled(page)
        page.get_by_test_id("stExpandSidebarButton").click()
        with page.expect_download() as download:
            page.get_by_role("button", name="Loom .json").click()
        media = download.value.url.split(port, 1)[1]  # /media/....json
        assert media.startswith("/media/")
        for host in ("127.0.0.1", "localhost", "[::1]"):
            assert ask(url, "/", f"{host}:{port}")[0] == 200
            assert ask(url, "/_stcore/stream", f"{host}:{port}", UPGRADE)[0] == 101
            status, body = ask(url, media, f"{host}:{port}")
            assert status == 200 and b"A private opening" in body
        for path, extra in (("/", ""), ("/_stcore/stream", UPGRADE), (media, ""),
                            (f"/?story={story_id}", ""), ("/_stcore/health", "")):  # fmt: skip
            assert ask(url, path, f"{FOREIGN}:{port}", extra) == (403, refusal(f"{FOREIGN}:{port}"))
        assert ask(url, "/", "")[0] == 403


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here")
def test_chromium_through_a_rebound_name_sees_the_refusal_and_no_desk(tmp_path, browser, watchman):
    LoomStore(tmp_path).create("A private opening nobody else may read.")
    mapped = f"--host-resolver-rules=MAP {FOREIGN} 127.0.0.1, MAP lloom.example.org 127.0.0.1"
    config = tmp_path / "config.toml"
    config.write_text((ROOT / "config.toml").read_text().replace(
        "allowed_hosts = []", 'allowed_hosts = ["lloom.example.org"]'))  # fmt: skip
    env = {**no_model(tmp_path, watchman), "LLOOM_CONFIG": str(config)}
    with streamlit_app(tmp_path, env=env) as (_, url):
        chromium = browser.browser_type  # the module's, launched again with the names mapped
        mapping = chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, mapped])
        port = url.rsplit(":", 1)[1]
        try:
            rebound = mapping.new_page()
            rebound.goto(f"http://{FOREIGN}:{port}/")
            text = rebound.locator("body").inner_text()
            assert text.strip() == refusal(f"{FOREIGN}:{port}").decode().strip()
            allowed_page = new_page(mapping, f"http://lloom.example.org:{port}/")
            assert "A private opening" in settled(allowed_page)  # a name the settings allow
        finally:
            mapping.close()
