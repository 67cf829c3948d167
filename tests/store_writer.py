"""A writer process for the crash test: saves numbered states until it is killed."""

import sys
from pathlib import Path

from weave.store import Store

store = Store(Path(sys.argv[1]))
story_id = sys.argv[2]
for i in range(1, 1_000_000):
    store.record(story_id, f"state {i} " + "x" * 2000, "edit")
    print(i, flush=True)
