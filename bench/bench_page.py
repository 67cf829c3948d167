"""The page's own cost, in Debian's Chromium on the real page and the real embedded model.

    .venv/bin/python bench/bench_page.py [--rounds 3] [--before CHECKOUT]
    .venv/bin/python bench/bench_page.py lookahead [--rounds 5]

Each mode starts `streamlit run lloom.py` on a free loopback port with a throwaway data
folder (scripts/screenshot.py's `running_app`) and drives headless Chromium (Playwright).
A time is click → settled, as bench/page_probe.py defines it (no element left stale from
the previous script run, three 50 ms polls in a row), never click → story box changed.

Default mode (issue 24): per round, at 1280×800, a fresh tab starts a starting story (round
i the i-th, so that a search is computed, not read from the backend's cache), then times
Start, Keep (📌, the second suggestion), accept the top suggestion, Bookmark, Undo (to a node
with its suggestions), Redo, Previous and Next branch (both nodes with their suggestions),
Go to a node; prints each action's median and range beside the search time inside it (the
status line's figure; "no search" when none ran). Then the layout at 1280×800, 1440×900 and
1920×1080 after Start: accept buttons fully in view without scrolling, the story's last line
in view, accept buttons in the page against suggestions shown.

`--before CHECKOUT` (issue 42): the same rounds on two apps at once, an earlier commit's
checkout (`git worktree add /tmp/before REV`) and this one, interleaved; prints each
action's median on both and now/before.

`lookahead` (issue 25): two apps in one run, LLOOM_LOOKAHEAD=0 and =3; each starts the first
starting story, then `--rounds` rounds, the apps interleaved: read for 6 s, accept the top
suggestion, time click → next suggestions shown and settled. Prints the medians side by side
and on/off.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402

from bench import page_probe as probe  # noqa: E402
from scripts.screenshot import launch_browser, running_app  # noqa: E402
from weave.config import load_settings  # noqa: E402

WINDOW = {"width": 1280, "height": 800}  # a common laptop: where the actions are timed
LAYOUTS = ((1280, 800), (1440, 900), (1920, 1080))
READ_S = 6  # look-ahead mode: how long the writer reads before accepting
LOOKAHEAD = {"off": "0", "on": "3"}  # LLOOM_LOOKAHEAD for the two apps


@dataclass(frozen=True)
class Timing:
    """One action's time, and the search inside it (None: no search ran)."""

    action: str
    seconds: float
    search: float | None
    cached: bool = False


# -- the actions -------------------------------------------------------------------------------
def suggestions_shown(page: Page, before: str | None = None):
    """A `ready` check: accept buttons on the page (and the story no longer `before`)."""

    def ready() -> bool:
        shown = page.get_by_role(probe.ACCEPT.role, name=probe.ACCEPT.pattern()).count() > 0
        return shown and (before is None or probe.story_text(page) != before)

    return ready


def story_reads(page: Page, text: str):
    return lambda: probe.story_text(page) == text


def timed(page: Page, action: str, element, **wait) -> Timing:
    done = probe.timed_click(page, element, **wait)
    if not done.searched:
        return Timing(action, done.seconds, None)
    line = probe.status(page)
    return Timing(action, done.seconds, line.seconds, line.cached)


def start(page: Page, url: str, opening: str) -> Timing:
    page.goto(url)
    probe.timed_click(page, probe.starting_story(page, opening), may_not_run=True)
    return timed(page, "Start", probe.find(page, probe.START).first, ready=suggestions_shown(page))


def one_round(page: Page, url: str, opening: str) -> list[Timing]:
    """Start (at S), Keep, accept (at A), Bookmark, Undo (S), Redo (A), the other branch and
    back, Go to S: each node an action lands on has its suggestions, except after Start and
    accept (a search each)."""
    times = [start(page, url, opening)]
    find = lambda target, nth=0: probe.find(page, target).nth(nth)  # noqa: E731
    before, label = probe.story_text(page), go_to_label(page)
    times.append(timed(page, "Keep (no search)", find(probe.KEEP, 1)))
    accept = suggestions_shown(page, before)
    times.append(timed(page, "accept top → next suggestions", find(probe.ACCEPT), ready=accept))
    taken = probe.story_text(page)
    times.append(timed(page, "Bookmark", find(probe.BOOKMARK)))
    times.append(timed(page, "Undo (node has suggestions)", find(probe.UNDO),
                       ready=story_reads(page, before)))  # fmt: skip
    times.append(timed(page, "Redo (node has suggestions)", find(probe.REDO),
                       ready=story_reads(page, taken)))  # fmt: skip
    times += branches(page, taken)
    times.append(timed(page, "Go to a node", go_to_option(page, label),
                       ready=story_reads(page, before)))  # fmt: skip
    return times


def branches(page: Page, taken: str) -> list[Timing]:
    """From A to the kept branch (its first visit searches, untimed), then timed back to A
    and over again: both nodes have their suggestions by then."""
    moves = {"Previous branch": probe.PREVIOUS, "Next branch": probe.NEXT}
    away = next((name for name, target in moves.items() if probe.present(page, target)), None)
    if away is None:
        return []
    back = next(name for name in moves if name != away)
    probe.timed_click(page, probe.find(page, moves[away]).first,
                      ready=suggestions_shown(page, taken))  # fmt: skip
    kept = probe.story_text(page)
    return [
        timed(page, back, probe.find(page, moves[back]).first, ready=story_reads(page, taken)),
        timed(page, away, probe.find(page, moves[away]).first, ready=story_reads(page, kept)),
    ]


def go_to_label(page: Page) -> str:
    """The Go to picker's entry for the node shown now (the text its box shows)."""
    return probe.find(page, probe.GO_TO).first.input_value()


def go_to_option(page: Page, label: str):
    """Open the Go to picker (that runs nothing; picking does) and find its entry `label`."""
    box = probe.find(page, probe.GO_TO).first
    box.click()
    if box.get_attribute("aria-expanded") != "true":  # a click may only focus it
        box.press("ArrowDown")
    options = probe.find(page, probe.GO_TO_OPTION)
    texts = [" ".join(text.split()) for text in options.all_inner_texts()]
    want = " ".join(label.split())
    if want not in texts:
        raise probe.PageChanged(f"the Go to picker has no entry {label!r}, only {texts}")
    return options.nth(texts.index(want))


# -- the runs ----------------------------------------------------------------------------------
@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = launch_browser(p)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Browser, width: int, height: int) -> Page:
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.set_default_timeout(120_000)
    return page


def actions(rounds: int) -> None:
    openings = load_settings().starting_stories
    if rounds > len(openings):
        print(f"note: {len(openings)} starting stories, so rounds past that search from cache")
    with running_app() as url, chromium() as browser:
        times: list[Timing] = []
        for i in range(rounds):
            page = new_page(browser, **WINDOW)
            times += one_round(page, url, openings[i % len(openings)])
            page.context.close()
        print_actions(times, rounds)
        layouts = []
        for width, height in LAYOUTS:
            page = new_page(browser, width, height)
            start(page, url, openings[0])
            layouts.append(probe.layout(page))
            page.context.close()
        print_layouts(layouts)


def before_after(rounds: int, before: Path) -> None:
    """The same rounds on two apps at once, the checkout `before` and this one, interleaved
    (which side goes first alternates by round): a change in load falls on both."""
    openings = load_settings().starting_stories
    with contextlib.ExitStack() as stack:
        urls = {"before": stack.enter_context(running_app(root=before.resolve())),
                "now": stack.enter_context(running_app())}  # fmt: skip
        browser = stack.enter_context(chromium())
        times: dict[str, list[Timing]] = {side: [] for side in urls}
        for i in range(rounds):
            sides = list(urls) if i % 2 == 0 else list(reversed(urls))
            for side in sides:
                page = new_page(browser, **WINDOW)
                times[side] += one_round(page, urls[side], openings[i % len(openings)])
                page.context.close()
        print_before_after(times, rounds, before)


def lookahead(rounds: int) -> None:
    opening = load_settings().starting_stories[0]
    with contextlib.ExitStack() as stack:
        urls = {k: stack.enter_context(running_app(env={"LLOOM_LOOKAHEAD": v}))
                for k, v in LOOKAHEAD.items()}  # fmt: skip
        browser = stack.enter_context(chromium())
        pages = {k: new_page(browser, **WINDOW) for k in LOOKAHEAD}
        for k, page in pages.items():
            start(page, urls[k], opening)
        times: dict[str, list[Timing]] = {k: [] for k in LOOKAHEAD}
        for _ in range(rounds):
            for k, page in pages.items():  # interleaved: a change in load falls on both
                page.wait_for_timeout(READ_S * 1000)
                before = probe.story_text(page)
                accept = probe.find(page, probe.ACCEPT).first
                times[k].append(timed(page, k, accept, ready=suggestions_shown(page, before)))
        print_lookahead(times, rounds)


# -- the output --------------------------------------------------------------------------------
def search_cell(timings: list[Timing]) -> str:
    """The search inside an action, and the page's own time around it: click → settled less
    the search, per round, for the rounds that computed one (a cached search costs ~0)."""
    searched = [t.search for t in timings if t.search is not None]
    if not searched:
        return "no search"
    cached = sum(t.cached for t in timings)
    note = f" ({cached} from cache or look-ahead)" if cached else ""
    around = [t.seconds - t.search for t in timings if t.search is not None and not t.cached]
    page = f"; the page's own {statistics.median(around):.2f} s" if around else ""
    return f"{statistics.median(searched):.1f} s in {len(searched)}/{len(timings)}{note}{page}"


def print_actions(times: list[Timing], rounds: int) -> None:
    print(f"\nclick → settled at {WINDOW['width']}×{WINDOW['height']}, {rounds} round(s)")
    print(f"{'action':34} {'median':>7} {'min–max':>13}   search inside (status line)")
    for action in dict.fromkeys(t.action for t in times):
        mine = [t for t in times if t.action == action]
        seconds = [t.seconds for t in mine]
        spread = f"{min(seconds):.2f}–{max(seconds):.2f}"
        print(f"{action:34} {statistics.median(seconds):6.2f}s {spread:>13}   {search_cell(mine)}")


def print_layouts(layouts: list[probe.Layout]) -> None:
    print("\nafter Start, without scrolling")
    print(f"{'window':>10}  {'accept buttons in view':>22}  {'story end in view':>17}  "
          f"{'accept buttons in page (shown)':>30}  suggestions")  # fmt: skip
    for at in layouts:
        window = f"{at.width}×{at.height}"
        in_view = f"{at.accept_in_view} of {at.suggestions}"
        page = f"{at.accept_buttons} ({at.accept_visible})"
        end = "yes" if at.story_end_in_view else "no"
        print(f"{window:>10}  {in_view:>22}  {end:>17}  {page:>30}  {at.suggestions}")


def print_before_after(times: dict[str, list[Timing]], rounds: int, before: Path) -> None:
    print(f"\nclick → settled at {WINDOW['width']}×{WINDOW['height']}, {rounds} round(s) each, "
          f"interleaved; before: {before}")  # fmt: skip
    print(f"{'action':34} {'before':>7} {'now':>7} {'now/before':>11}   search inside now")
    for action in dict.fromkeys(t.action for t in times["now"]):
        medians = {side: statistics.median(t.seconds for t in mine if t.action == action)
                   for side, mine in times.items()}  # fmt: skip
        ratio = medians["now"] / medians["before"]
        inside = search_cell([t for t in times["now"] if t.action == action])
        print(f"{action:34} {medians['before']:6.2f}s {medians['now']:6.2f}s {ratio:10.2f}×   "
              f"{inside}")  # fmt: skip


def print_lookahead(times: dict[str, list[Timing]], rounds: int) -> None:
    print(f"\nread {READ_S} s, accept the top suggestion → next suggestions settled, "
          f"{rounds} rounds each, interleaved")  # fmt: skip
    medians = {}
    for k, mine in times.items():
        seconds = [t.seconds for t in mine]
        medians[k] = statistics.median(seconds)
        every = " ".join(f"{s:.2f}" for s in seconds)
        print(f"look-ahead {k:3} (LLOOM_LOOKAHEAD={LOOKAHEAD[k]}): median {medians[k]:.2f} s "
              f"[{every}]   search inside: {search_cell(mine)}")  # fmt: skip
    print(f"on / off: {medians['on'] / medians['off']:.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("actions", "lookahead"), default="actions")
    parser.add_argument("--rounds", type=int, help="rounds per action (3; lookahead: 5)")
    parser.add_argument("--before", type=Path, metavar="CHECKOUT",
                        help="actions: also time another checkout's page (an earlier commit's "
                        "`git worktree`), side by side, the rounds interleaved")  # fmt: skip
    args = parser.parse_args()
    cores, load = os.cpu_count(), os.getloadavg()[0]
    print(f"bench_page {args.mode}: Chromium, embedded model; {cores} cores, load {load:.1f} "
          "at the start (a shared machine: figures are a baseline)")  # fmt: skip
    began = time.monotonic()
    try:
        if args.mode == "lookahead":
            lookahead(args.rounds or 5)
        elif args.before is not None:
            before_after(args.rounds or 3, args.before)
        else:
            actions(args.rounds or 3)
    except probe.PageChanged as error:
        sys.exit(f"bench_page: the page changed: {error}")
    print(f"\n{time.monotonic() - began:.0f} s in all; load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
