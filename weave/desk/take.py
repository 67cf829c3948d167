"""➜ Take after typing in the story box: what one click does when the story just changed.

A click after typing sends both: Streamlit applies the story box's edit first (a new
branch, the cursor on it), then the button's; the suggestion was made for the node before
the edit. It is taken when it still fits the edited story, that is when the edit left the
story's last `FITS_CHARS` characters as they were (it continues the same words): as a child
of the edited story's node. Otherwise nothing is taken and the page says so in one line
(`Workspace.notice`, until the next move). A click on a suggestion left from before
another move (a second ➜ before the page redrew) keeps it as a branch where it was made,
as `Workspace.accept` does, and says so: a suggestion is never kept silently in place of
being taken. This module decides and calls the workspace; it draws nothing: what it says
is data (`NOT_TAKEN`, `KEPT`, left in `Workspace.notice`), which the page shows. The page's
rows (`page.rows`, `page.part`) call `take`.
"""

from __future__ import annotations

from dataclasses import replace

from weave.desk.session import Workspace
from weave.desk.spot import Piece

FITS_CHARS = 200  # the story's end a suggestion continues: what an edit must leave as it was
NOT_TAKEN = ("Your edit is a new branch; the suggestions were for the text before it, so "
             "none was taken: take one of the new ones.")  # fmt: skip
KEPT = ("That suggestion was for the story before your last move: it is kept as a branch "
        "where it was made (📌), and you stay here.")  # fmt: skip


def take(ws: Workspace, piece: Piece, shown: str | None, *, prefix_space: bool) -> None:
    """Take `piece` as shown: at its own node when the writer is still there, after an edit
    made in the same click when it still fits, else say why not."""
    if piece.node_id == ws.cursor:
        ws.accept(piece, shown, prefix_space=prefix_space)
        return
    if ws.loom.node(ws.cursor).kind != "edited":  # a button left from before another move
        ws.accept(piece, shown, prefix_space=prefix_space)  # kept where it was made
        ws.notice = KEPT
        return
    before = ws.loom.text(piece.node_id) if piece.node_id in ws.loom.nodes else None
    if before is None or not ws.text.endswith(before[-FITS_CHARS:]):
        ws.notice = NOT_TAKEN
        return
    # the edited story's ids differ: the suggestion's own are not known to fit after them
    moved = replace(piece, node_id=ws.cursor, exact=False)
    ws.accept(moved, shown, prefix_space=prefix_space)
