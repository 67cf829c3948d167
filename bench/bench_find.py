"""Finding a branch in a 10,000-node loom (issue 34: <= 50 ms), in a real store.

Builds one story of 10,000 nodes in a temporary data folder (a few words a node, every
fourth node a branch back to an earlier one, as a writer's evening leaves it) beside
three small stories, then times `LoomStore.find` (the page's search box and `loom find`)
for a phrase that spans two nodes, one found in every node, and one found nowhere:
medians of several runs, side by side with reading the story's loom (`LoomStore.load`,
what any move costs) for scale. Read the load average printed with the figures.

    .venv/bin/python bench/bench_find.py
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from weave.loom.store import LoomStore  # noqa: E402

NODES = 10_000
REPEATS = 7
TARGET_MS = 50.0
WORDS = ["the", "river", "rose", "and", "mill", "wheel", "turned", "slowly", "while", "she",
         "wove", "a", "cloth", "of", "blue"]  # fmt: skip


def build(store: LoomStore) -> str:
    """A story of NODES nodes: accepts of a few words, every fourth one from an earlier node."""
    rng = random.Random(34)
    sid, _ = store.create("The weaver of Hollin Ford kept her loom above the mill.")

    def grow(loom):
        made = [loom.cursor]
        for n in range(NODES - 2):
            if n % 4 == 3:
                loom = loom.go(rng.choice(made))
            text = " " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
            loom = loom.accept(text + (" Moonwater" if n == NODES // 2 else ""))
            made.append(loom.cursor)
        return loom.accept(" and then the heron spoke.")

    store.update(sid, grow)
    return sid


def timed(fn, repeats: int = REPEATS) -> float:
    """The median milliseconds of `fn()`."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as folder:
        store = LoomStore(folder)
        started = time.perf_counter()
        sid = build(store)
        built = time.perf_counter() - started
        for opening in ("Once upon a time,", "In the age before man,", "She opened the door"):
            store.create(opening)
        nodes = store.info(sid).nodes
        load = timed(lambda: store.load(sid))
        rows = {
            "a phrase across two nodes ('heron spoke')": "heron spoke",
            "a rare word ('moonwater')": "moonwater",
            "found nowhere ('nightingale')": "nightingale",
            "a word in most nodes ('the'), first 50": "the",
        }
        figures = {label: (timed(lambda q=q: store.find(q)), len(store.find(q)))
                   for label, q in rows.items()}  # fmt: skip
    print(f"load average after: {os.getloadavg()}")
    print(f"a story of {nodes:,} nodes (built in {built:.1f} s) and three small ones")
    print(f"{'reading its loom (LoomStore.load), for scale':48s} {load:7.1f} ms")
    for label, (ms, count) in figures.items():
        verdict = "met" if ms <= TARGET_MS else "NOT met"
        print(f"{'find: ' + label:48s} {ms:7.1f} ms  {count:3d} found  "
              f"({ms / load:.2f}x a load; target <= {TARGET_MS:.0f} ms: {verdict})")  # fmt: skip


if __name__ == "__main__":
    main()
