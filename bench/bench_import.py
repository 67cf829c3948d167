"""Importing a large socketteer loom: a ~1.6 MB tree of ~760 nodes, 21 deep, made here.

The tree is the shape socketteer/loom saves (nested `children`, `meta` with a source and
a time, UI state on every node, chapters beside the root), its texts ~400 characters of
bench/long_story.txt (the 4 spaces a level socketteer indents with are much of the size).
Each run imports it into a fresh store (`weave.interop.files.import_file`: parse, detect, build,
check, store); then the same story from LLooM's own export and from
its Open Loom v2 export, the three taking turns. Printed: the medians of REPEATS runs, and
each format's time beside LLooM's own (the target: the socketteer import in at most 2 s).

    .venv/bin/python bench/bench_import.py
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from weave.interop.files import export_json, export_openloom, import_file  # noqa: E402
from weave.loom.store import LoomStore  # noqa: E402

NODES, DEPTH, TEXT_CHARS, REPEATS = 760, 21, 400, 5


def socketteer_loom(seed: int = 0) -> dict:
    """A socketteer-style tree of `NODES` nodes, `DEPTH` deep (a spine, then branches)."""
    rng = random.Random(seed)
    words = (ROOT / "bench" / "long_story.txt").read_text().split()
    made: list[tuple[dict, int]] = []

    def node(parent: tuple[dict, int] | None) -> None:
        start = rng.randrange(len(words) - 600)
        text = " " + " ".join(words[start : start + 600])[: TEXT_CHARS - 1]
        item = {"id": f"n{len(made)}", "text": text, "children": [], "visited": True,
                "open": 0, "meta": {"source": rng.choice(["AI", "prompt", "mixed"]),
                                    "creation_timestamp": "2023-02-14T18:16:30"},
                "text_attributes": {"child_preview": text[:12]}}  # fmt: skip
        depth = 1 if parent is None else parent[1] + 1
        if parent is not None:
            parent[0]["children"].append(item)
        made.append((item, depth))

    node(None)
    while len(made) < DEPTH:
        node(made[-1])
    while len(made) < NODES:
        node(rng.choice([m for m in made if m[1] < DEPTH]))
    return {"root": made[0][0], "chapters": {"c": {"title": "One"}}, "selected_node_id": "n20"}


def timed(data: bytes, folder: Path) -> tuple[float, str, LoomStore]:
    store = LoomStore(folder)
    start = time.perf_counter()
    story_id, _ = import_file(store, data)
    return time.perf_counter() - start, story_id, store


def main() -> None:
    doc = socketteer_loom()
    data = json.dumps(doc, indent=4).encode()
    with tempfile.TemporaryDirectory() as tmp:
        _, story_id, store = timed(data, Path(tmp) / "first")
        loom = store.load(story_id)
        depth = max(len(loom.path(n)) - 1 for n in loom.nodes)  # the empty root above n0
        files = {"socketteer": data, "LLooM": export_json(store, story_id).encode(),
                 "Open Loom v2": export_openloom(store, story_id).encode()}  # fmt: skip
        print(f"socketteer loom: {len(data) / 1e6:.2f} MB, {len(loom.nodes) - 1} nodes, "
              f"{depth} deep; LLooM {len(files['LLooM']) / 1e6:.2f} MB, "
              f"Open Loom {len(files['Open Loom v2']) / 1e6:.2f} MB")  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in files}
        for run in range(REPEATS):
            for name, file in files.items():
                times[name].append(timed(file, Path(tmp) / f"{name}-{run}")[0])
    own = statistics.median(times["LLooM"])
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"{name:13s} import {median:.3f} s (median of {REPEATS}; "
              f"{min(runs):.3f}–{max(runs):.3f}), {median / own:.2f}× LLooM's own")  # fmt: skip


if __name__ == "__main__":
    main()
