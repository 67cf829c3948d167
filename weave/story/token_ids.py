"""The token ids of a story at a node of its loom, the same every time they are asked for.

A loom node may carry the ids of its own text (an accepted beam's, whose KV the MLX
fragment tree holds); they are only a cache of the text. `TokenIds` builds a path's ids
from its nodes' usable ids, tokenizing the text from the deepest node that has none, and
remembers the paths it built (per model), so that going back to a node asks the backend
for the very ids it searched with there, and costs no prefill. It stores nothing and knows
nothing of searches or pages.
"""

from __future__ import annotations

from backends.base import Backend
from backends.errors import BackendError
from weave.loom.loom import Loom, Node
from weave.lru import LRU

KEPT_IDS = 64  # token-id paths remembered per tab


class TokenIds:
    """One tab's memo of path ids, keyed by (model, node id)."""

    def __init__(self) -> None:
        self._ids: LRU[tuple[str, str], tuple[int, ...]] = LRU(KEPT_IDS)

    def path_ids(self, backend: Backend, loom: Loom, node_id: str) -> tuple[int, ...]:
        """The token ids of the story at `node_id` for `backend`.

        A node's own ids follow its parent's path ids; from a node without usable ids for
        this model up, the path's text is tokenized.
        """
        model, path = backend.model_name, loom.path(node_id)
        tail: list[tuple[int, ...]] = []
        for node in reversed(path):
            known = self._ids.get((model, node.id))
            if known is not None:
                base = known
                break
            if node.parent is None:
                base = ()
                break
            if not usable(backend, node):
                base = tuple(backend.tokenize(loom.text(node.id)))
                self._ids.put((model, node.id), base)
                break
            tail.append(node.token_ids)
        ids = base + tuple(i for piece in reversed(tail) for i in piece)
        self._ids.put((model, node_id), ids)
        return ids


def usable(backend: Backend, node: Node) -> bool:
    """Whether `node`'s stored ids can be fed to `backend`: an imported or crafted loom may
    hold any, so ids made by another model, or ids this backend refuses (`check_ids`: not
    its token ids, or none it knows), are read as unknown."""
    if node.token_ids is None or node.model != backend.model_name:
        return False
    try:
        backend.check_ids(node.token_ids)
    except BackendError:
        return False
    return True
