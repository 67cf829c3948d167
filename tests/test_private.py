"""Private by default, shared on purpose: the real page, started as a writer starts it.

Each test starts `streamlit run lloom.py` from the repository (so `.streamlit/config.toml`
applies) on a free port, reads the sockets it listens on from /proc, and drives it in
headless Chromium through 127.0.0.1 only. The login flow is Streamlit's own (`st.login`,
its `/oauth2callback`) against a real OpenID Connect provider on loopback
(`oidc-provider-mock`). No traffic goes to any address but loopback; the model backend is
a llama.cpp URL on a loopback port that counts who connects, so a test can tell the page
never ran the model. The group's test runs on each database (`stories_at`): the page's
stories in its data folder's SQLite file, then in a PostgreSQL database.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import socket
import threading
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from scripts.screenshot import streamlit_app, wait_idle
from tests.older_stores import as_schema
from tests.servers import free_port
from weave.interop.files import export_json
from weave.loom.store import LoomStore
from weave.loom.store_sql import is_database_url

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here"),
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc"),
]
ROOT = Path(__file__).resolve().parent.parent
ALICE, BOB = "alice@example.org", "bob@example.org"


# -- the page's process and its sockets ----------------------------------------------------
class Watchman:
    """A loopback TCP port that accepts and counts connections: a backend URL that tells
    whether the page tried to use the model."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.calls = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.calls += 1
            conn.close()

    def close(self) -> None:
        self.socket.close()


def listening(pid: int) -> set[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """The (address, port) pairs process `pid` listens on for TCP, from /proc."""
    fd_dir = Path(f"/proc/{pid}/fd")
    inodes = set()
    for fd in fd_dir.iterdir():
        try:
            link = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.add((_proc_address(address), int(port, 16)))
    return found


def _proc_address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp{,6} write an address as 32-bit words in the host's (little) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


# -- the browser -------------------------------------------------------------------------
def new_page(browser, url: str, headers: dict | None = None):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True,
                                  extra_http_headers=headers)  # fmt: skip
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(url)
    return page


def settled(page) -> str:
    """The page's text once its script has run."""
    page.locator(
        "[data-testid='stMain'] [data-testid='stElementContainer'] >> visible=true"
    ).first.wait_for()
    wait_idle(page)
    return page.locator("[data-testid='stApp']").inner_text()


def no_model(data: Path, watchman: Watchman) -> dict:
    """The environment of a page whose model is a loopback port that only counts calls."""
    return {"LLOOM_BACKEND": "llamacpp", "LLAMA_API_URL": f"http://127.0.0.1:{watchman.port}"}


@pytest.fixture
def watchman():
    w = Watchman()
    yield w
    w.close()


# -- 1. private by default ---------------------------------------------------------------
def test_the_page_started_as_readme_says_listens_on_loopback_only(tmp_path, watchman):
    with streamlit_app(tmp_path, env=no_model(tmp_path, watchman)) as (process, url):
        sockets = listening(process.pid)
    port = int(url.rsplit(":", 1)[1])
    assert any(p == port for _, p in sockets), sockets  # the page's own, found
    assert sockets and all(address.is_loopback for address, _ in sockets), sockets


# -- 2. never open by accident -----------------------------------------------------------
def test_on_every_interface_without_login_it_shows_how_to_share_and_nothing_else(
    tmp_path, browser, watchman
):
    story_id, _ = LoomStore(tmp_path).create("A private opening nobody else may read.")
    env = no_model(tmp_path, watchman)
    with streamlit_app(tmp_path, "--server.address", "0.0.0.0", env=env) as (process, url):
        assert any(not a.is_loopback for a, _ in listening(process.pid))  # it is reachable
        for page_url in (f"{url}/", f"{url}/?story={story_id}"):
            text = settled(new_page(browser, page_url))
            assert "no login is set up" in text and "secrets.toml" in text
            assert "[sharing] open = true" in text
            assert "private opening" not in text and "Start" not in text
    assert watchman.calls == 0  # the model was never asked


def test_through_a_reverse_proxy_a_loopback_page_asks_for_a_login_too(tmp_path, browser, watchman):
    LoomStore(tmp_path).create("A private opening nobody else may read.")
    with streamlit_app(tmp_path, env=no_model(tmp_path, watchman)) as (_, url):
        url += "/"
        text = settled(new_page(browser, url, {"X-Forwarded-For": "203.0.113.9"}))
        assert "through a proxy" in text and "Your stories" not in text
        assert watchman.calls == 0  # the model was never asked
        assert "Your stories" in settled(new_page(browser, url))  # from this machine


def test_an_open_page_is_opened_on_purpose_in_the_config(tmp_path, browser, watchman):
    LoomStore(tmp_path).create("A story for a trusted room.")
    config = tmp_path / "config.toml"
    config.write_text((ROOT / "config.toml").read_text().replace("open = false", "open = true"))
    env = {**no_model(tmp_path, watchman), "LLOOM_CONFIG": str(config)}
    with streamlit_app(tmp_path, "--server.address", "0.0.0.0", env=env) as (_, url):
        page = new_page(browser, f"{url}/")
        # The library is drawn once the page's runs are done; on a loaded machine that can
        # be after the first pause `settled` sees, so wait for the story itself.
        page.get_by_text("A story for a trusted room.").first.wait_for()
        text = settled(page)
    assert "no login is set up" not in text
    assert "A story for a trusted room." in text


# -- 3. login for a group ----------------------------------------------------------------
def auth_secrets(data: Path, port: int, provider: str) -> Path:
    """A secrets.toml in `data` for logins through the OIDC `provider` (its URL) to the
    page on `port`; its path."""
    secrets_file = data / "secrets.toml"
    secrets_file.write_text(
        "[auth]\n"
        f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_hex(16)}"\n'
        'client_id = "lloom"\nclient_secret = "not-a-secret"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n'
    )
    return secrets_file


@contextmanager
def group_page(data: Path, provider: str, watchman: Watchman, stories: str | Path | None = None):
    """The page with login configured in a secrets.toml of its own; the stories in `data`,
    or in the database `stories` names."""
    port = free_port()
    secrets_file = auth_secrets(data, port, provider)
    env = no_model(data, watchman)
    if is_database_url(stories):
        env["LLOOM_DATABASE_URL"] = str(stories)
    with streamlit_app(data, "--secrets.files", str(secrets_file), env=env, port=port):
        yield f"http://127.0.0.1:{port}"


def provider_user(provider: str, sub: str, email: str, *, verified: bool = True) -> str:
    """Make `sub` a user of the provider whose ID token says `email` (verified or not);
    the writer the store knows them as (issuer and subject)."""
    claims = json.dumps({"email": email, "email_verified": verified}).encode()
    request = urllib.request.Request(f"{provider}/users/{sub}", data=claims, method="PUT",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as reply:
        assert reply.status == 204
    return f"{provider} {sub}"


def authorize(page, sub: str) -> None:
    settled(page)
    page.get_by_role("button", name="Log in").click()
    page.locator("input[name='sub']").fill(sub)
    page.get_by_role("button", name="Authorize").click()


def log_in(page, sub: str, email: str | None = None) -> str:
    authorize(page, sub)
    page.get_by_text(f"Logged in as {email or sub}").wait_for()
    return settled(page)


def test_writers_in_a_group_see_import_and_download_only_their_own_stories(
    tmp_path, stories_at, browser, provider, watchman
):
    local = LoomStore(stories_at)
    local.create("A draft made before the login, on this machine.")
    alice_key, bob_key = (provider_user(provider, who, who) for who in (ALICE, BOB))
    alice_id, _ = local.as_writer(alice_key).create("Alice's garden of forking paths.")
    bob_id, _ = local.as_writer(bob_key).create("Bob's harbour at low tide.")
    with group_page(tmp_path, provider, watchman, stories_at) as url:
        stranger = settled(new_page(browser, f"{url}/?story={alice_id}"))
        assert "Log in" in stranger and "garden" not in stranger and "harbour" not in stranger

        alice = new_page(browser, url)
        text = log_in(alice, ALICE)
        assert "Alice's garden" in text
        assert "harbour" not in text and "before the login" not in text

        bob = new_page(browser, url)
        text = log_in(bob, BOB)
        assert "Bob's harbour" in text and "garden" not in text and "before the login" not in text

        # Bob opening Alice's story by its URL: nothing opens, and the page says so
        bob.goto(f"{url}/?story={alice_id}")
        text = settled(bob)
        assert f"No story {alice_id} of yours here" in text and "garden" not in text

        # Bob's import is Bob's
        exported = export_json(local, local.create("A tale Bob brings along.")[0])
        bob.goto(url)
        settled(bob)
        bob.get_by_test_id("stExpandSidebarButton").click()
        bob.get_by_role("button", name="📥 Import a story").click()  # its popover
        bob.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
            files=[
                {"name": "tale.json", "mimeType": "application/json", "buffer": exported.encode()}
            ]  # fmt: skip
        )
        bob.get_by_text("A tale Bob brings along").first.wait_for()
        assert [s.title for s in local.as_writer(bob_key).stories()].count(
            "A tale Bob brings along."
        ) == 1
        assert "A tale Bob brings along" not in settled_reload(alice)

        # Bob's downloads hold Bob's story only
        bob.goto(f"{url}/?story={bob_id}")
        settled(bob)
        expand = bob.get_by_test_id("stExpandSidebarButton")  # unless open since the import
        if expand.count():
            expand.click()
        with bob.expect_download() as download:
            bob.get_by_role("button", name="Loom .json").click()
        loom = json.loads(Path(download.value.path()).read_text())
        texts = " ".join(node["text"] for node in loom["nodes"])
        assert "Bob's harbour" in texts and "garden" not in texts

        # log out: the page asks for a login again, and shows no story
        bob.get_by_role("button", name="Log out").click()
        bob.get_by_role("button", name="End session").click()  # the provider's own page
        bob.get_by_role("button", name="Log in").wait_for()
        assert "harbour" not in settled(bob)
    assert {s.title for s in local.stories()} == {
        "A draft made before the login, on this machine.", "A tale Bob brings along."
    }  # fmt: skip


def settled_reload(page) -> str:
    page.reload()
    return settled(page)


def test_an_unverified_address_names_nobody_and_a_verified_one_takes_its_stories_over(
    tmp_path, browser, provider, watchman
):
    """Issue 31: Mallory, whose provider let her claim alice's address unverified, was
    "Logged in as alice@example.org" with Alice's stories. Now she is told why not; Alice
    (another subject, the address verified) gets the stories a schema 4 file kept under it."""
    local = LoomStore(tmp_path)
    garden, _ = local.as_writer(ALICE).create("Alice's garden of forking paths.")
    as_schema(local.path, 4)  # as schema 4 kept it: by address
    provider_user(provider, "mallory", ALICE, verified=False)
    alice = provider_user(provider, "alice-0042", ALICE)
    with group_page(tmp_path, provider, watchman) as url:
        mallory = new_page(browser, url)
        authorize(mallory, "mallory")
        mallory.get_by_text("has not verified the e-mail address").wait_for()
        text = settled(mallory)
        assert "Your provider has not verified the e-mail address alice@example.org" in text
        assert "garden" not in text and "Logged in as" not in text and "Start" not in text
        mallory.goto(f"{url}/?story={garden}")
        assert "garden" not in settled(mallory)

        text = log_in(new_page(browser, url), "alice-0042", ALICE)
        assert "Alice's garden of forking paths." in text
    assert [s.id for s in LoomStore(tmp_path).as_writer(alice).stories()] == [garden]
