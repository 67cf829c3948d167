"""The fragment tree's eviction on small KV arrays: least recently used leaves first, a
node left without children becomes a leaf in the same call, and the cap holds after."""

from __future__ import annotations

import mlx.core as mx

from backends.mlx.kv_tree import FragmentTree


def kv(tokens: int) -> mx.array:
    return mx.zeros((1, 1, tokens, 4))  # (layers, kv_heads, tokens, head_dim): 16 B a token


def held(tree: FragmentTree) -> list[list[int]]:
    return sorted(leaf.tokens for leaf in tree._leaves())


def test_evict_drops_least_recently_used_leaves_then_their_emptied_parents():
    tree = FragmentTree(max_bytes=1 << 20)
    tree.insert([1, 2, 3], 0, kv(3), kv(3), None)  # root -> [1,2,3]
    tree.insert([1, 2, 3, 4], 3, kv(1), kv(1), None)  # -> [4]
    tree.insert([1, 2, 3, 5], 3, kv(1), kv(1), None)  # -> [5]
    tree.insert([7, 8], 0, kv(2), kv(2), None)  # root -> [7,8]
    tree.match([1, 2, 3, 5])  # now [5]'s path is the most recently used
    tree.match([7, 8])  # and [7,8] more recent still
    per_token = 2 * 16
    assert tree.nbytes == 7 * per_token
    tree.max_bytes = 6 * per_token
    tree.evict()  # [4] is the oldest leaf: dropping it fits
    assert held(tree) == [[5], [7, 8]] and tree.nbytes == 6 * per_token
    tree.max_bytes = 2 * per_token
    tree.evict()  # [5], then [1,2,3] (a leaf once [5] is gone); [7,8] is the newest
    assert held(tree) == [[7, 8]] and tree.nbytes == 2 * per_token
    tree.max_bytes = 0
    tree.evict()
    assert held(tree) == [] and tree.nbytes == 0
