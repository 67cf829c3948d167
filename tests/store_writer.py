"""A writer process for the store's tests, as a browser tab adds to a story: from the
story's first node it accepts " TAG1", " TAG2", ... each under the last, printing each
number once its node has committed, until COUNT or until it is killed.

Usage: store_writer.py FOLDER STORY_ID TAG [COUNT [SIZE]] (SIZE: extra characters per node).
"""

import sys

from weave.loom.store import LoomStore

folder, story_id, tag = sys.argv[1:4]
count = int(sys.argv[4]) if len(sys.argv) > 4 else 1_000_000
size = int(sys.argv[5]) if len(sys.argv) > 5 else 0
store = LoomStore(folder)
start = store.load(story_id)
cursor = start.children(start.root)[0].id  # the first node: the other writer may have moved on
for i in range(1, count + 1):
    text = f" {tag}{i}" + "x" * size
    loom = store.update(story_id, lambda loom, at=cursor, text=text: loom.at(at).accept(text))
    cursor = loom.cursor
    print(i, flush=True)
