"""Take screenshot.png from the real running page: a story, its suggestions and its tree.

    .venv/bin/python -m scripts.screenshot [--out screenshot.png]

Starts `streamlit run lloom.py` on a free loopback port with a throwaway data folder,
drives headless Chromium (Playwright) through a few branches of the first starting story
on the real model (accept, go back, accept another, keep a third, bookmark), and saves
the 1280×800 window as a writer sees it: the desk, the story and its suggestions left,
this search's token tree right. `running_app` (and `streamlit_app` under it),
`launch_browser`, `app_page` (both, one tab) and the page helpers are shared with the
browser tests and the benchmarks.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.servers import started

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
STORY = "textarea[aria-label='Story']"
TREE = ".lloom-graph svg, [data-testid='stGraphVizChart'] svg"  # dot's SVG, or Streamlit's
ROW = "[data-testid='stMarkdownContainer'] div[style^='white-space: pre-wrap']"
ROW_TEXT = """row => { const copy = row.cloneNode(true);
  copy.querySelectorAll('.variants').forEach(mark => mark.remove());
  return copy.textContent; }"""  # a row's text, without its "+n" mark
ACCEPT = "➜ Take"
STORY_TREE = "🌳 Story tree"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(
    data_dir: Path | None = None,
    *,
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
    root: Path = ROOT,
) -> Iterator[str]:
    """`streamlit run lloom.py` on a free loopback port, headless; yields its URL, stops it
    after. `env`: variables laid over this process's environment (e.g. LLOOM_LOOKAHEAD);
    `root`: the checkout whose lloom.py runs (another commit's, for a before/after run)."""
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lloom-")))
        args = ("--server.headless", "true", "--server.address", "127.0.0.1",
                "--browser.gatherUsageStats", "false")  # fmt: skip
        app = streamlit_app(data_dir, *args, env=env, timeout=timeout, root=root)
        _, url = stack.enter_context(app)
        yield url


@contextlib.contextmanager
def streamlit_app(
    data_dir: Path,
    *args: str,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
    root: Path = ROOT,
) -> Iterator[tuple[subprocess.Popen, str]]:
    """`streamlit run lloom.py` from the checkout `root` (its `.streamlit/config.toml`
    applies) with `args`, on `port` (a free one by default), the stories in `data_dir`;
    yields the process and its URL on 127.0.0.1 once it answers there, and stops it after."""
    port = port or free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", str(root / "lloom.py"),
        "--server.port", str(port), "--server.fileWatcherType", "none", *args,
    ]  # fmt: skip
    env = {**(env or {}), "LLOOM_DATA_DIR": str(data_dir)}
    with tempfile.TemporaryFile() as log, started(command, log, env=env, cwd=root) as server:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, server, log, timeout)
        yield server, url


def _wait_healthy(url: str, server: subprocess.Popen, log, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"streamlit exited:\n{log.read().decode(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"streamlit did not answer at {url} within {timeout:.0f} s")


@contextlib.contextmanager
def app_page(
    data_dir: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    viewport: tuple[int, int] = (1280, 800),
    timeout_ms: int = 180_000,
) -> Iterator:
    """A headless Chromium tab of `viewport` on a freshly started page (`running_app`,
    `env` laid over), its default timeout `timeout_ms`; both stop after."""
    from playwright.sync_api import sync_playwright

    with running_app(data_dir, env=env) as url, sync_playwright() as p:
        browser = launch_browser(p)
        try:
            width, height = viewport
            page = browser.new_context(viewport={"width": width, "height": height}).new_page()
            page.set_default_timeout(timeout_ms)
            page.goto(url)
            yield page
        finally:
            browser.close()


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def button(page, name: str):
    """The buttons whose label starts with `name` (a button's key follows its label)."""
    return page.get_by_role("button", name=re.compile("^" + re.escape(name)))


def wait_for_suggestions(page, timeout_ms: int = 120_000) -> None:
    """Until the first ➜ Take button and the graph are on the page."""
    button(page, ACCEPT).first.wait_for(timeout=timeout_ms)
    page.locator(TREE).first.wait_for(timeout=timeout_ms)


def start_first_story(page) -> None:
    page.get_by_role("button", name="Start").click()
    wait_for_suggestions(page)


def wait_idle(page) -> None:
    """Until the page's script has finished its run (and any run it asked for)."""
    page.wait_for_timeout(300)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for()


def share_from_the_sidebar(page, email: str) -> None:
    """Share the open story with `email` to co-write, from the sidebar (opened and closed
    again)."""
    page.get_by_test_id("stExpandSidebarButton").click()
    page.get_by_text("👥 Share this story").click()
    page.get_by_role("textbox", name="A writer's e-mail address").fill(email)
    page.get_by_role("button", name="Share", exact=True).click()
    page.get_by_text(f"{email}: co-writing").wait_for()
    page.get_by_test_id("stSidebarCollapseButton").locator("button").click()


def story_text(page) -> str:
    return page.locator(STORY).input_value()


def click(page, name: str, nth: int = 0) -> None:
    """Click the `nth` button called `name` and wait for the page to settle."""
    button(page, name).nth(nth).click()
    wait_idle(page)


def show_story_tree(page) -> None:
    """Open the story tree's tab (the page then draws it)."""
    page.get_by_role("tab", name=STORY_TREE).click()
    wait_idle(page)
    page.locator(TREE).first.wait_for()


def row_text(page, nth: int) -> str:
    """Suggestion row `nth`'s text as a writer reads it (its faint marks as what they mark,
    without the "+n" of the texts it stands for)."""
    shown = page.locator(ROW).nth(nth).evaluate(ROW_TEXT)
    return shown.replace("·", " ").replace("␣", " ").replace("↵", "\n")


def undo_until(page, text: str) -> None:
    """Undo until the story reads `text` (one undo takes back lone suggestions taken too)."""
    while story_text(page) != text:
        click(page, "↩ Undo")


def weave_branches(page) -> None:
    """Accept the best suggestion, go back, accept the second; there keep one and bookmark."""
    start = story_text(page)
    click(page, ACCEPT)
    undo_until(page, start)
    click(page, ACCEPT, 1)
    click(page, "📌 Keep", 1)
    click(page, "🔖 Bookmark")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshot.png")
    args = parser.parse_args()
    with app_page() as page:
        start_first_story(page)
        weave_branches(page)
        page.mouse.move(5, 5)  # no tooltip in the picture
        page.wait_for_timeout(1500)  # let the graph finish its layout
        page.get_by_test_id("stToast").wait_for(state="detached")  # Keep's, over the tree
        page.screenshot(path=str(args.out))
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
