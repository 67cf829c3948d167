"""A writing group on the real page, two ways side by side in one run (issue 43): 2 page
processes ("replicas") × 8 writers on one PostgreSQL database, against 1 page process ×
16 writers on SQLite, the model one llama.cpp server for both.

Each setup starts its page processes (`tests.replicas`: `streamlit run lloom.py`, the
login of a writing group against `oidc-provider-mock`, a real OpenID Connect provider on
loopback); 16 writers log in through Streamlit's own callback in headless Chromium (on
PostgreSQL writer k lands on replica k mod 2, as a sticky proxy would send them), each
starts a story of their own, and then, all at once, driven inside each page (so the 16
run together, not one after another in the driver):

- accepts: every writer takes the top suggestion `--accepts` times, each followed by the
  search at the new node; moves per second over all writers, first click to last settle;
- moves that need no search: every writer goes ↩ Undo / ↪ Redo `--moves` times in all
  (the suggestions at both nodes are kept), each from its click to the page settled (no
  element left stale three polls in a row, 25 ms apart, in the page's clock): moves per
  second, and the median and 95th percentile of one move;
- a co-writer's branch: writer 0 shares their story with writer 1 (on PostgreSQL, on the
  other replica) from the page, writer 1 opens it; writer 0 takes a suggestion `--shown`
  times: from the moment the node is in the database (polled every 10 ms) to the moment
  writer 1's page shows the branch ("✍️ … added" and its Go, known by the node's id: a
  small model's branches often read alike) without a click (polled in the page every
  20 ms).

Look-ahead is off (`LLOOM_LOOKAHEAD=0`): both setups share one model server, and its
background searches would only add the same noise to both. The machine may be shared
and loaded: compare the columns, not the seconds.

    flock /tmp/lloom-heavy.lock .venv/bin/python -m bench.bench_group \\
        [--writers 16] [--accepts 3] [--moves 6] [--shown 5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import sync_playwright

from scripts.screenshot import launch_browser, share_from_the_sidebar, wait_idle
from tests.llama_server import llama_server
from tests.postgres_server import database, postgres_server
from tests.replicas import replicas
from tests.test_private import log_in, provider_user
from weave.loom.store import LoomStore

OWN_STORY = "✍️ Write my own"
TAKE, UNDO, REDO = "➜ Take", "↩ Undo", "↪ Redo"
POLL_MS = 25

DRIVE = """async ([moves, pollMs]) => {
  const sleep = ms => new Promise(done => setTimeout(done, ms));
  const app = document.querySelector("[data-testid='stApp']");
  const box = () => document.querySelector("textarea[aria-label='Story']");
  const find = label => [...document.querySelectorAll("button")]
    .find(b => b.innerText.includes(label) && !b.disabled);
  const idle = () => app.getAttribute("data-test-script-state") === "notRunning"
    && !document.querySelector('[data-stale="true"]');
  const times = [];
  const failed = () => document.body.innerText.includes("The model did not answer");
  for (const label of moves) {
    let button = null;
    const until = performance.now() + 1800000;
    while (!(button = find(label)) || !idle()) {
      if (performance.now() > until || failed())
        throw new Error("no " + label + " to click: " + document.body.innerText.slice(-400));
      await sleep(pollMs);
    }
    const before = box().value, t0 = performance.now();
    button.click();
    while (box() === null || box().value === before) await sleep(pollMs);
    let clean = 0, first = 0;
    while (clean < 3) {
      await sleep(pollMs);
      if (idle()) { if (clean++ === 0) first = performance.now(); } else clean = 0;
    }
    times.push([performance.timeOrigin + t0, performance.timeOrigin + first]);
  }
  return times;
}"""
START = "(args) => { window.__done = null; window.__failed = null; (" + DRIVE + ")(args)" \
        ".then(r => { window.__done = r; }, e => { window.__failed = String(e); }); }"  # fmt: skip
WATCH = """() => {
  const seen = new Set(), times = [];
  const look = () => {
    for (const go of document.querySelectorAll("[class*='st-key-news_go_']")) {
      const key = [...go.classList].find(c => c.startsWith("st-key-news_go_"));
      if (!seen.has(key)) {
        seen.add(key);
        times.push(performance.timeOrigin + performance.now());
      }
    }
  };
  look();
  times.length = 0;
  window.__shown = times;
  setInterval(look, 20);
}"""


@dataclass(frozen=True)
class Row:
    label: str
    accepts_per_s: float
    moves_per_s: float
    move_p50: float
    move_p95: float
    shown_median: float
    shown_max: float


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def drive(pages: list, moves: list[list[str]]) -> list[tuple[float, float]]:
    """Run each page's list of moves inside that page, all pages at once; every move's
    (click, settled) times, epoch seconds."""
    for page, labels in zip(pages, moves, strict=True):
        page.evaluate(START, [labels, POLL_MS])
    times = []
    for page in pages:
        while (done := page.evaluate("window.__done || window.__failed")) is None:
            time.sleep(0.2)
        if isinstance(done, str):
            raise RuntimeError(f"a writer's page failed: {done}")
        times += [(t0 / 1000, t1 / 1000) for t0, t1 in done]
    return times


def log_writers_in(browser, urls: list[str], provider: str, count: int) -> tuple[list, list]:
    """`count` writers, writer k on `urls[k % len(urls)]`, each with a story of their own
    and its first suggestions (the stories begun one by one, searched all at once); their
    pages and their keys in the store."""
    pages, keys = [], []
    for k in range(count):
        email = f"writer{k}@example.org"
        keys.append(provider_user(provider, email, email))
        page = browser.new_context(viewport={"width": 1100, "height": 900}).new_page()
        page.set_default_timeout(1_800_000)
        page.goto(urls[k % len(urls)])
        log_in(page, email)
        page.get_by_text(OWN_STORY).click()
        page.get_by_label("Your story").fill(f"The diary of writer {k} began by the lighthouse.")
        page.get_by_role("button", name="Start").click()
        pages.append(page)
    for page in pages:
        suggested(page)
    return pages, keys


def suggested(page) -> None:
    """Until the page shows suggestions; a page that says the model failed stops the run."""
    deadline = time.monotonic() + 1800
    while not page.get_by_role("button", name=TAKE).count():
        failed = page.get_by_text("The model did not answer")
        if failed.count() or time.monotonic() > deadline:
            raise RuntimeError(f"a writer got no suggestions: {page.inner_text('body')[-600:]}")
        time.sleep(0.5)
    wait_idle(page)


def shown_after(store: LoomStore, owner, reader, story_id: str, times: int) -> list[float]:
    """Seconds from each of `owner`'s accepts being in the store to `reader`'s page showing it."""
    reader.evaluate(WATCH)
    seconds = []
    for _ in range(times):
        grown = len(store.load(story_id).nodes)
        wait_idle(owner)
        owner.evaluate(START, [[TAKE], POLL_MS])
        while len(store.load(story_id).nodes) == grown:
            time.sleep(0.01)
        saved, seen = time.time(), len(seconds)
        deadline = saved + 30
        while len(reader.evaluate("window.__shown")) == seen:
            if time.time() > deadline:
                captions = reader.locator("[data-testid='stCaptionContainer']").all_inner_texts()
                raise RuntimeError("a co-writer's branch did not show within 30 s; the page's "
                                   f"captions: {captions!r}")  # fmt: skip
            time.sleep(0.02)
        seconds.append(reader.evaluate("window.__shown")[seen] / 1000 - saved)
        while owner.evaluate("window.__done || window.__failed") is None:
            time.sleep(0.1)
    return seconds


def share(owner, reader, email: str, title: str) -> None:
    """`owner` shares their open story with `email` from the sidebar; `reader` opens it."""
    share_from_the_sidebar(owner, email)
    wait_idle(owner)
    reader.get_by_test_id("stExpandSidebarButton").click()
    reader.get_by_role("button", name="📚 All stories · new story").click()
    reader.get_by_role("button", name=f"📖 {title}").click()
    suggested(reader)


def measure(label: str, browser, urls: list[str], url: str, provider: str, args) -> Row:
    store = LoomStore(url)
    try:
        pages, keys = log_writers_in(browser, urls, provider, args.writers)
        print(f"{label}: {args.writers} writers in, each with a story", flush=True)
        taken = drive(pages, [[TAKE] * args.accepts for _ in pages])
        accepts_per_s = len(taken) / (max(t1 for _, t1 in taken) - min(t0 for t0, _ in taken))
        moves = drive(pages, [[UNDO, REDO] * (args.moves // 2) for _ in pages])
        seconds = [t1 - t0 for t0, t1 in moves]
        moves_per_s = len(moves) / (max(t1 for _, t1 in moves) - min(t0 for t0, _ in moves))
        owner, reader = pages[0], pages[1]
        owners = store.as_writer(keys[0])
        (story,) = owners.stories()
        share(owner, reader, "writer1@example.org", story.title)
        shown = shown_after(owners, owner, reader, story.id, args.shown)
        for page in pages:
            page.context.close()
        return Row(label, accepts_per_s, moves_per_s, statistics.median(seconds),
                   p95(seconds), statistics.median(shown), max(shown))  # fmt: skip
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--accepts", type=int, default=3)
    parser.add_argument("--moves", type=int, default=6)
    parser.add_argument("--shown", type=int, default=5)
    args = parser.parse_args()
    import oidc_provider_mock

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the provider's request log
    rows = []
    with (
        ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="lloom-group-") as folder,
        oidc_provider_mock.run_server_in_thread() as oidc,
        sync_playwright() as p,
    ):
        provider = f"http://localhost:{oidc.server_port}"
        model = stack.enter_context(llama_server(Path(folder) / "llama.log", slots=8))
        env = {
            "LLOOM_BACKEND": "llamacpp",
            "LLAMA_API_URL": model,
            "LLOOM_LOOKAHEAD": "0",
            "LLAMA_TIMEOUT": "1800",
        }  # 16 searches at once on 2 cores take their time
        postgres = stack.enter_context(postgres_server())
        browser = launch_browser(p)
        print("the machine may be shared and loaded; compare the columns", flush=True)
        with (
            database(postgres) as url,
            replicas(Path(folder) / "pg", 2, provider=provider, database=url, env=env) as two,
        ):
            label = f"2 replicas x {args.writers // 2} writers, PostgreSQL"
            rows.append(measure(label, browser, [r.url for r in two], url, provider, args))
        with replicas(Path(folder) / "sqlite", 1, provider=provider, database=None,
                      env=env) as one:  # fmt: skip
            label = f"1 process x {args.writers} writers, SQLite"
            data = str(Path(folder) / "sqlite" / "replica0")
            rows.append(measure(label, browser, [one[0].url], data, provider, args))
        browser.close()
    print(f"{'':38} {'accepts/s':>9} {'moves/s':>8} {'move p50':>9} {'move p95':>9} "
          f"{'branch shown':>13} {'(max)':>6}")  # fmt: skip
    for r in rows:
        print(f"{r.label:38} {r.accepts_per_s:9.2f} {r.moves_per_s:8.2f} {r.move_p50:8.2f}s "
              f"{r.move_p95:8.2f}s {r.shown_median:12.2f}s {r.shown_max:5.2f}s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
