"""The page as the page benchmark sees it: where things are, and when a click has settled.

Every way `bench_page.py` finds something on the page is in the block at the top (roles,
accessible names, visible text), so a new layout changes only those lines; an element that
is not there fails with `PageChanged`, a line naming what was looked for.

Timing happens in the page's own clock. Before a click (`timed_click`) or any other act
(`timed_action`: a key), the page is armed: a capturing listener marks the first
mousedown/click/keydown (t0), and an observer notes when the app's script run begins. The
page has *settled* once that run has begun and no element is left with `data-stale="true"`
(Streamlit's mark on what the previous script run drew and this one has not redrawn yet)
three polls in a row, 50 ms apart; the time reported is the first of those three polls.
The story box changes well before that: it is never the mark.
On the way, a search's live status line ("Weaving…") seen in any poll says a search ran.
This module does not start apps or browsers, and decides no scenario.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from playwright.sync_api import Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout


# -- how the benchmark finds things on the page: change these lines when the page changes --
# Buttons by role and a pattern searched in their accessible name (not anchored: a key hint
# added to a label keeps matching); text by what a writer reads.
@dataclass(frozen=True)
class Target:
    """Something on the page: an ARIA role and a pattern its accessible name contains."""

    role: str
    name: str
    what: str  # for the error message

    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.name)


START = Target("button", r"^Start\b", "the start page's Start button")
ACCEPT = Target("button", "➜", "a suggestion's accept (➜) button")
KEEP = Target("button", "📌 Keep", "a suggestion's 📌 Keep button")
UNDO = Target("button", "↩ Undo", "the ↩ Undo button")
REDO = Target("button", "↪ Redo", "the ↪ Redo button")
PREVIOUS = Target("button", "◀ Previous", "the ◀ Previous (branch) button")
NEXT = Target("button", "Next ▶", "the Next ▶ (branch) button")
BOOKMARK = Target("button", "🔖 (Bookmark|Unmark)", "the 🔖 Bookmark button")
GO_TO = Target("combobox", "^Go to$", "the Go to node picker")
GO_TO_OPTION = Target("option", "", "an entry of the open Go to picker")
STORY = Target("textbox", "^Story$", "the story box")
STATUS = re.compile(
    r"(\d+) suggestions? (?:in|from cache,|from look-ahead,|kept from an earlier search here \() "
    r"?([\d.]+) s"
)
SEARCHING = r"Weaving…|Reading the story…"  # the status line while a search runs
STALE = '[data-stale="true"]'  # Streamlit: an element the running script has not redrawn
APP = "[data-testid='stApp']"  # Streamlit: carries data-test-script-state
# -------------------------------------------------------------------------------------------

POLL_MS = 50
CLEAN_POLLS = 3


class PageChanged(RuntimeError):
    """The page lacks something the benchmark looks for: update the block at the top."""


@dataclass(frozen=True)
class Settled:
    """One timed click: click → settled, and whether a search ran on the way."""

    seconds: float
    searched: bool


@dataclass(frozen=True)
class Status:
    """The search's status line: how many suggestions, in how long, and whether computed
    (`cached`: no, it came from the cache, from look-ahead, or was kept from an earlier
    search: made before the click)."""

    suggestions: int
    seconds: float
    cached: bool


def find(page: Page, target: Target, *, timeout_ms: float = 120_000) -> Locator:
    """All elements matching `target`, once at least one is on the page."""
    found = page.get_by_role(target.role, name=target.pattern())
    try:
        found.first.wait_for(timeout=timeout_ms)
    except PlaywrightTimeout:
        raise PageChanged(
            f"no {target.role} whose name matches /{target.name}/ ({target.what}) "
            f"within {timeout_ms / 1000:.0f} s: edit the selectors in bench/page_probe.py"
        ) from None
    return found


def present(page: Page, target: Target) -> bool:
    """Whether an enabled `target` is on the page now (no waiting)."""
    found = page.get_by_role(target.role, name=target.pattern())
    return found.count() > 0 and found.first.is_enabled()


def starting_story(page: Page, text: str) -> Locator:
    """The start page's choice of the starting story `text` (its label, to click)."""
    choice = page.get_by_text(text, exact=True)
    try:
        choice.first.wait_for(timeout=120_000)
    except PlaywrightTimeout:
        raise PageChanged(f"no starting story reading {text!r} on the start page") from None
    return choice.first


def story_text(page: Page) -> str:
    return find(page, STORY).first.input_value()


def status(page: Page) -> Status:
    """The status line's figures (the page must have settled)."""
    line = page.get_by_text(STATUS)
    if line.count() == 0:
        raise PageChanged(
            f"no status line matching /{STATUS.pattern}/: edit STATUS in bench/page_probe.py"
        )
    text = line.first.inner_text()
    count, seconds = STATUS.search(text).groups()
    made_before = ("from cache", "from look-ahead", "kept from")
    return Status(int(count), float(seconds), any(words in text for words in made_before))


ARM = """([app, searching]) => {
  const root = document.querySelector(app);
  if (!root) return false;
  const old = window.__bench;
  if (old) { old.observer.disconnect(); old.forget(); }
  const b = {t0: null, started: false, searched: false, searching: new RegExp(searching)};
  const mark = () => { if (b.t0 === null) b.t0 = performance.now(); };
  const kinds = ['mousedown', 'click', 'keydown'];
  kinds.forEach(k => document.addEventListener(k, mark, true));
  b.forget = () => kinds.forEach(k => document.removeEventListener(k, mark, true));
  b.observer = new MutationObserver(() => {
    if (b.t0 !== null && root.getAttribute('data-test-script-state') !== 'notRunning')
      b.started = true;
  });
  b.observer.observe(root, {attributes: true, attributeFilter: ['data-test-script-state']});
  window.__bench = b;
  return true;
}"""

SETTLE = """async ([stale, pollMs, cleanPolls, timeoutMs, graceMs]) => {
  const b = window.__bench;
  const sleep = ms => new Promise(done => setTimeout(done, ms));
  const until = performance.now() + timeoutMs;
  let clean = 0, first = 0;
  while (performance.now() < until) {
    const now = performance.now();
    const staleNow = document.querySelectorAll(stale).length;
    if (b.t0 !== null && staleNow > 0) b.started = true;
    if (graceMs !== null && b.t0 !== null && now - b.t0 > graceMs) b.started = true;
    if (b.searching.test(document.body.textContent)) b.searched = true;
    if (b.started && staleNow === 0) {
      if (clean === 0) first = now;
      if (++clean >= cleanPolls)
        return {ms: first - b.t0, searched: b.searched, started: true};
    } else {
      clean = 0;
    }
    await sleep(pollMs);
  }
  return {ms: null, searched: b.searched, started: b.started, clicked: b.t0 !== null};
}"""


def timed_click(
    page: Page,
    element: Locator,
    *,
    ready: Callable[[], bool] | None = None,
    may_not_run: bool = False,
    timeout_s: float = 180,
) -> Settled:
    """Click `element`; wait until the page settles with `ready()` true; time it in the page.

    `ready`: a check in Python that the click's outcome is on the page (e.g. suggestions
    shown); while it is false the wait goes on, and the time is that of the settle it passes.
    `may_not_run`: for setting up, a click that may start no script run (choosing what is
    already chosen): after a second with none, the page counts as settled.
    """
    return timed_action(page, element.click, ready=ready, may_not_run=may_not_run,
                        timeout_s=timeout_s)  # fmt: skip


def timed_action(
    page: Page,
    act: Callable[[], object],
    *,
    ready: Callable[[], bool] | None = None,
    may_not_run: bool = False,
    timeout_s: float = 180,
) -> Settled:
    """`timed_click` for any act of the writer's: a click, or a key (`box.press("Enter")`);
    the time starts at its first mousedown, click or keydown."""
    if not page.evaluate(ARM, [APP, SEARCHING]):
        raise PageChanged(f"no {APP} element carrying Streamlit's script state")
    act()
    grace = 1000 if may_not_run else None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left_ms = (deadline - time.monotonic()) * 1000
        result = page.evaluate(SETTLE, [STALE, POLL_MS, CLEAN_POLLS, left_ms, grace])
        if result["ms"] is None:
            raise TimeoutError(f"the page did not settle within {timeout_s:.0f} s of the click "
                               f"(clicked: {result.get('clicked')}, run began: "
                               f"{result['started']})")  # fmt: skip
        if ready is None or ready():
            return Settled(result["ms"] / 1000, result["searched"])
    raise TimeoutError(
        f"the page settled, but not with the click's outcome, within {timeout_s:.0f} s"
    )


# -- the layout ------------------------------------------------------------------------------
FULLY_IN_VIEW = """buttons => buttons.filter(b => {
  const r = b.getBoundingClientRect();
  if (r.width === 0 || r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth)
    return false;
  const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
  return hit !== null && b.contains(hit);  // nothing (a header, a popover) drawn over it
}).length"""

LAST_LINE_IN_VIEW = """box => {
  const r = box.getBoundingClientRect(), css = getComputedStyle(box);
  const line = parseFloat(css.lineHeight) || 1.4 * parseFloat(css.fontSize);
  let bottom = r.bottom;
  if (box.scrollHeight !== undefined && 'value' in box) {  // a text box: its text's end
    if (box.scrollTop + box.clientHeight < box.scrollHeight - 2) return false;
    bottom = r.top + box.clientTop
      + Math.min(box.scrollHeight - box.scrollTop, box.clientHeight)
      - parseFloat(css.paddingBottom);
  }
  const top = bottom - line;
  if (top < 0 || bottom > innerHeight) return false;
  const hit = document.elementFromPoint(r.left + 12, (top + bottom) / 2);
  return hit !== null && (box.contains(hit) || hit.contains(box));
}"""


@dataclass(frozen=True)
class Layout:
    """What a writer sees without scrolling, and how many accept buttons the page holds."""

    width: int
    height: int
    accept_in_view: int
    suggestions: int
    story_end_in_view: bool
    accept_buttons: int  # in the page, hidden ones included
    accept_visible: int  # of those, the ones shown


def layout(page: Page) -> Layout:
    """Measure the page as it stands (call after it has settled)."""
    accept = page.get_by_role(ACCEPT.role, name=ACCEPT.pattern())
    every = page.get_by_role(ACCEPT.role, name=ACCEPT.pattern(), include_hidden=True)
    size = page.viewport_size
    return Layout(
        width=size["width"],
        height=size["height"],
        accept_in_view=accept.evaluate_all(FULLY_IN_VIEW),
        suggestions=status(page).suggestions,
        story_end_in_view=find(page, STORY).first.evaluate(LAST_LINE_IN_VIEW),
        accept_buttons=every.count(),
        accept_visible=accept.count(),
    )
