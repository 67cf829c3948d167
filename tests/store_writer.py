"""A writer process for the store's tests: saves numbered states until done or killed.

Usage: store_writer.py FOLDER STORY_ID TAG [COUNT [SIZE]]. Prints each number once its
save has committed.
"""

import sys

from weave.store import StoryStore

folder, story_id, tag = sys.argv[1:4]
count = int(sys.argv[4]) if len(sys.argv) > 4 else 1_000_000
size = int(sys.argv[5]) if len(sys.argv) > 5 else 20_000
store = StoryStore(folder)
for i in range(1, count + 1):
    store.save(story_id, f"{tag} {i} " + "x" * size, token_ids=[i, i + 1], model="writer")
    print(i, flush=True)
