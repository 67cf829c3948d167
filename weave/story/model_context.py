"""What a backend is sent for a story: its steered context, fitted to the model's window.

`fitted_context` is where a story (text, and its ids where known) and its `Steering`
become the `weave.story.context.Context` a search, a draw or the alternatives use: it asks
`build_context` for at most the backend's read window (`Backend.read_window`: the model's
context length, or less where reading is slow) less the `room` the caller needs after it
(a search's `max_depth`, a draw's `max_tokens`; 0 for alternatives), so where the whole
is too long the story's start is cut, never the memory, the lore or the note,
and `Context.left_out` says how many story tokens were left out.

`sent_ids` are the ids a backend receives (`Backend.prompt_ids`): the context's own, or,
for a backend whose API takes text (the OpenAI backend reads its first id as the story
and the rest as the beam), the whole context as one text. `story_alternatives`
asks for the model's alternatives at the story's own last tokens, under the steering:
memory, lore and note are what the model read, never tokens a writer can branch at.

`Contexts` is a tab's memo of them: the story's path ids at a node (`TokenIds`) under its
steering, fitted, per (model, ids, steering, room), the latest few (`weave.lru`), since
the page asks the current node's on every run. This module owns no policy of the page's;
`weave.story.context` builds.
"""

from __future__ import annotations

from collections.abc import Sequence

from backends.base import Backend, TokenAlternatives
from weave.loom.loom import Loom
from weave.lru import LRU
from weave.story.context import Context, build_context
from weave.story.steering import Steering
from weave.story.token_ids import TokenIds

KEPT_CONTEXTS = 8  # contexts remembered per tab (the page shows the current one each run)


def fitted_context(
    backend: Backend,
    steering: Steering,
    story_text: str,
    story_ids: Sequence[int] | None = None,
    *,
    room: int,
) -> Context:
    """The context for a story under `steering`, leaving `room` tokens of the model's window.

    Args:
        backend: the backend searched (its tokenizer and context length).
        story_text: the story; story_ids: its exact ids where known (None: tokenized).
        room: the tokens the caller adds after the context (0 for none).
    Raises:
        ValueError: `room` alone fills the model's window, or memory, lore and note leave
            no room for the story (the message says which to shorten).
        BackendError: the backend's tokenizer failed.
    """
    length = backend.read_window
    if length is not None and length - room < 1:
        raise ValueError(f"a depth of {room} tokens does not fit the model's {length} tokens")
    return build_context(
        steering,
        story_text,
        tokenize=backend.tokenize,
        detokenize=backend.detokenize,
        story_ids=story_ids,
        max_tokens=None if length is None else length - room,
    )


class Contexts:
    """A tab's contexts, made once per (model, path ids, steering, room): `of`."""

    def __init__(self) -> None:
        self.ids = TokenIds()
        self._kept: LRU[tuple, Context] = LRU(KEPT_CONTEXTS)

    def of(
        self, backend: Backend, loom: Loom, node_id: str, steering: Steering, *, room: int
    ) -> Context:
        """What `backend` reads at `node_id` of `loom` for a search that adds `room` tokens:
        the path's ids under `steering`, fitted to the model's window (`fitted_context`).

        Raises `BackendError` (tokenizing) or `ValueError` (it cannot fit).
        """
        ids = self.ids.path_ids(backend, loom, node_id)
        key = (backend.model_name, ids, steering, room)
        if key not in self._kept:
            text = loom.text(node_id)
            self._kept.put(key, fitted_context(backend, steering, text, ids, room=room))
        return self._kept[key]


def sent_ids(backend: Backend, context: Context) -> list[int]:
    """The ids `backend` is sent for `context` (one text's for a text-only backend)."""
    return backend.prompt_ids(context.ids, context.text)


def story_positions(context: Context) -> list[int]:
    """Where the story's own ids sit in `context.ids` (memory, lore and note left out)."""
    positions, at = [], 0
    for part in context.parts:
        if part.kind == "story":
            positions.extend(range(at, at + part.token_count))
        at += part.token_count
    return positions


def story_alternatives(
    backend: Backend, context: Context, k: int, *, last: int
) -> list[TokenAlternatives] | None:
    """`Backend.alternatives` at the story's last `last` tokens in `context`, the top `k`
    at each; their positions index `context.ids`. None where the backend cannot say.
    Raises `BackendError`."""
    positions = story_positions(context)[-last:]
    if not positions:
        return []
    rows = backend.alternatives(list(context.ids), k, start=max(1, positions[0]))
    if rows is None:
        return None
    story = set(positions)
    return [row for row in rows if row.position in story]
