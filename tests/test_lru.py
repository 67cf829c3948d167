"""The one LRU of the engine's caches (weave.lru)."""

from __future__ import annotations

from weave.lru import LRU


def test_put_keeps_the_newest_and_drops_the_oldest_past_its_size():
    kept = LRU[str, int](2)
    kept.put("a", 1)
    kept.put("b", 2)
    kept.put("a", 3)  # refreshed: now the newest
    kept.put("c", 4)
    assert list(kept.items()) == [("a", 3), ("c", 4)]


def test_reading_does_not_reorder():
    kept = LRU[str, int](2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1 and "a" in kept
    kept.put("c", 3)
    assert list(kept) == ["b", "c"]
