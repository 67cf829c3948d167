"""The desk's keyboard: which key does what, and the one line that lists them.

Pure data for the page (`lloom.py` hands each key to its button's `shortcut=`, so the
button shows it). The keys are Streamlit's shortcut strings. Every one is a letter or a
digit, Shift at most: Streamlit ignores such keys while a text box has the focus, and
fires Ctrl, Alt and Cmd chords even there, so none is used (a writer typing "z" in the
story must not undo). C and R are Streamlit's own and cannot be used.
"""

from __future__ import annotations

from dataclasses import dataclass

NUMBERED = 9  # suggestions 1 to 9 have keys; the rest are clicked


@dataclass(frozen=True)
class Key:
    """A key and what it does, in the words of the key line."""

    shortcut: str
    does: str


MOVES = {  # button -> its key
    "again": Key("A", "suggest again"),
    "undo": Key("Z", "undo"),
    "redo": Key("Y", "redo"),
    "previous": Key("P", "previous branch"),
    "next": Key("N", "next branch"),
    "bookmark": Key("B", "bookmark"),
    "sample": Key("S", "sample"),
}
WORD = Key("W", "take the first row's first word")  # ✂ Word, under the rows


def accept_key(rank: int) -> str | None:
    """The key that takes the suggestion ranked `rank` (0 the best); None past the ninth."""
    return str(rank + 1) if 0 <= rank < NUMBERED else None


def keep_key(rank: int) -> str | None:
    """The chord that keeps (📌) the suggestion ranked `rank`; None past the ninth."""
    return f"Shift+{rank + 1}" if 0 <= rank < NUMBERED else None


def key_line() -> str:
    """Every key in one line, as the page shows it under the suggestions."""
    moves = " · ".join(f"{key.shortcut} {key.does}" for key in MOVES.values())
    return (f"⌨️ Keys: 1–{NUMBERED} take a suggestion · Shift+1–{NUMBERED} keep it (📌) · "
            f"{WORD.shortcut} {WORD.does} · {moves} · none while you type in a box")  # fmt: skip
