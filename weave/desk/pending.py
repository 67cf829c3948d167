"""A tab's moves shown but not saved yet, saved in order: a failed write never loses one.

A move is shown at once and kept in `PendingMoves` until the store takes it
(`LoomStore.update`); one that fails stays, and is saved at the next change or rerun
with the node ids it was shown with. Where another tab saved a node of the same text at
the same place meanwhile, the store keeps theirs, and our id stands for it in the moves
still pending (`stored_id`). A move the stored loom cannot take (it names a node the
store lacks) is dropped, and said (`Saved.dropped`).
`weave.desk.session.Workspace` makes the moves and holds its tab's lock around saving.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from weave.desk.library import Library
from weave.loom.loom import Loom, NoSuchNode

Move = Callable[[Loom], Loom]


@dataclass(frozen=True)
class Pending:
    """A move shown but not saved yet, and the id of the node it adds (if it adds one)."""

    move: Move
    made: str | None = None


@dataclass(frozen=True)
class Saved:
    """What saving the pending moves leaves to show: the loom (as stored, once all are
    saved) and why a move was dropped, if one was."""

    loom: Loom
    dropped: str | None = None


class PendingMoves:
    """The moves of one story a tab has shown but not saved, in order."""

    def __init__(self, library: Library) -> None:
        self._library = library
        self._moves: list[Pending] = []
        self._stand_ins: dict[str, str] = {}  # our unsaved node id -> the stored node kept

    def __len__(self) -> int:
        return len(self._moves)

    def add(self, move: Move, made: str | None) -> None:
        self._moves.append(Pending(move, made))

    def stored_id(self, node_id: str) -> str:
        """The stored node that `node_id` stands for (itself, unless another tab saved the
        same text first)."""
        return self._stand_ins.get(node_id, node_id)

    def save(self, story_id: str, shown: Loom) -> Saved:
        """Save the moves in order into story `story_id`, shown as `shown`; those that fail
        stay (the library's `save_error` says why)."""
        store, dropped = self._library.store, None
        while self._moves:
            pending = self._moves[0]
            try:
                saved = self._library.save(partial(store.update, story_id, pending.move))
            except (NoSuchNode, ValueError) as e:
                dropped = f"A change could not be saved and was dropped: {e}."
                last = len(self._moves) == 1
                saved = self._library.save(lambda: store.load(story_id)) if last else None
            else:
                if saved is None:
                    return Saved(shown, dropped)
                self._stand_in(pending.made, saved, shown)
            self._moves.pop(0)
            if not self._moves and saved is not None:
                cursor = self.stored_id(shown.cursor)
                shown = saved.at(cursor) if cursor in saved.nodes else saved
        return Saved(shown, dropped)

    def kept(self, save: Callable[[], None]) -> bool:
        """Save the moves (`save`); whether any are still unsaved, said in `save_error`:
        the tab then stays in its story."""
        if self._moves:
            save()
        if self._moves:
            self._library.save_error = (
                f"{len(self._moves)} change(s) to this story are not saved yet "
                f"({self._library.save_error}); the story stays open until they are"
            )
        return bool(self._moves)

    def _stand_in(self, made: str | None, saved: Loom, shown: Loom) -> None:
        """When the node a saved move added is not in the store (another tab had saved the
        same text there first, and the store kept theirs), ours stands for theirs."""
        if made is None or made in saved.nodes or made not in shown.nodes:
            return
        ours = shown.nodes[made]
        theirs = saved.child_with_text(self.stored_id(ours.parent), ours.text)
        if theirs is not None:
            self._stand_ins[made] = theirs.id
