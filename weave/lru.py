"""The one small LRU the engine's per-tab caches share: an ordered dict of at most `most`
entries, the newest last.

`put` makes an entry the newest and drops the oldest past `most`; reading does not
reorder (the caches here are read far more often than written, and what a tab made last
is what it returns to). Used by a tab's searches, draws and contexts
(`weave.desk.offers`), its token-id paths (`weave.story.token_ids`) and look-ahead's
finished searches (`weave.desk.lookahead`). The MLX backend's KV tree has its own, by
bytes (`backends.mlx.kv_tree`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(OrderedDict[K, V], Generic[K, V]):
    """At most `most` entries; `put` adds or refreshes one as the newest."""

    def __init__(self, most: int) -> None:
        super().__init__()
        assert most > 0
        self.most = most

    def put(self, key: K, value: V) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.most:
            self.popitem(last=False)
